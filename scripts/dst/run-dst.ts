/**
 * `pnpm dst`: the deterministic simulation (test/dst/schedule.ts), many seeded schedules of the real
 * coordinator, scheduler, guard and handler wrapper in one process on the in-memory stores.
 *
 * - `pnpm dst --seeds N [--from 0x…] [--first]`: N schedules from a seed (random unless given); each
 *   failure is shrunk and prints the line that replays it; ends with `dst: N schedules in S s (R a
 *   minute), F failures` and exits 1 on a failure. `--first` stops at the first failure (how long the
 *   simulation takes to find a bug: scripts/dst/dst-vs-bugs.ts).
 * - `pnpm dst --seed 0x… [--faults 0,2] [--events]`: replays one schedule, bit for bit: its faults in
 *   order and what it broke; `--faults` keeps only those of the seed's faults (a shrunk schedule),
 *   and `--events` prints every event the nodes logged, at its virtual time.
 * - `--group` with either: the lease group's schedules (test/dst/group-schedule.ts: three members
 *   sharing six leases) in place of the single lease's.
 *
 * A failing schedule is shrunk by leaving its faults out one at a time (each drawn fault is a group:
 * a failover with the copy it goes back to), keeping each removal after which the schedule still
 * breaks the same invariant, until no single fault more can go.
 */
import { randomInt } from 'node:crypto';
import { parseArgs } from 'node:util';
import { runGroupSchedule } from '../../test/dst/group-schedule.js';
import { runSchedule, T0, type ScheduleResult } from '../../test/dst/schedule.js';

const { values } = parseArgs({ options: { events: { type: 'boolean' }, faults: { type: 'string' }, first: { type: 'boolean' }, group: { type: 'boolean' }, seed: { type: 'string' }, seeds: { type: 'string' }, from: { type: 'string' } } });

/** What either kind of schedule comes to, as far as running, shrinking and replaying it goes, and one line of what it did. */
type RunResult = Pick<ScheduleResult, 'seed' | 'failures' | 'excused' | 'faults' | 'drawn' | 'events'> & { readonly did: string };
const run = async (options: { seed: number; faults?: readonly number[] }): Promise<RunResult> => {
  if (values.group === true) {
    const result = await runGroupSchedule(options);
    return { ...result, did: `${result.elections} elections, ${result.judged.handovers} graceful handovers and ${result.judged.takeovers} crash takeovers judged` };
  }
  const result = await runSchedule(options);
  return { ...result, did: `${result.fires} fires took effect, ${result.elections} elections, ${result.takeovers} writes ended by a takeover` };
};
const hex = (seed: number) => `0x${seed.toString(16).padStart(8, '0')}`;
const parseSeed = (text: string): number => {
  const seed = Number(text);
  if (!Number.isSafeInteger(seed) || seed < 0 || seed > 0xffffffff) throw new TypeError(`a seed is a number in 0..0xffffffff, not ${JSON.stringify(text)}`);
  return seed;
};
const parseFaults = (text: string): number[] => {
  const faults = text.split(',').map(Number);
  if (faults.some((n) => !Number.isSafeInteger(n) || n < 0)) throw new TypeError(`--faults is a list of fault numbers, as 0,2, not ${JSON.stringify(text)}`);
  return faults;
};
/** What a failure is, for the shrinker: its first broken invariant, without the figures that vary. */
const kindOf = (result: RunResult) => (result.failures[0] ?? '').replace(/[0-9]+/g, '#');

/** Leaves out the faults a failure does not need, one at a time, while the same invariant still breaks. */
async function shrink(failed: RunResult): Promise<{ faults: number[]; result: RunResult }> {
  let kept = Array.from({ length: failed.drawn }, (_, i) => i);
  let result = failed;
  for (const fault of [...kept]) {
    const fewer = kept.filter((k) => k !== fault);
    const tried = await run({ seed: failed.seed, faults: fewer });
    if (tried.failures.length > 0 && kindOf(tried) === kindOf(failed)) {
      kept = fewer;
      result = tried;
    }
  }
  return { faults: kept, result };
}

const replayLine = (seed: number, faults: readonly number[] | undefined) => `pnpm dst${values.group === true ? ' --group' : ''} --seed ${hex(seed)}${faults === undefined ? '' : ` --faults ${faults.join(',')}`}`;

async function main(): Promise<number> {
  if (values.seed !== undefined) {
    const faults = values.faults === undefined ? undefined : parseFaults(values.faults);
    const result = await run({ seed: parseSeed(values.seed), ...(faults === undefined ? {} : { faults }) });
    console.log(`dst: seed ${hex(result.seed)}: ${result.did}`);
    for (const fault of result.faults) console.log(`  fault at ${fault}`);
    if (values.events === true) for (const { at, event } of result.events) console.log(`  +${at - T0} ms ${JSON.stringify(event, (_key, value: unknown) => (typeof value === 'bigint' ? `${value}` : value))}`);
    for (const excused of result.excused) console.log(`  excused: ${excused}`);
    for (const failure of result.failures) console.log(`  FAILED: ${failure}`);
    console.log(result.failures.length === 0 ? 'dst: passed' : `dst: ${result.failures.length} invariants broken; replay: ${replayLine(result.seed, faults)}`);
    return result.failures.length === 0 ? 0 : 1;
  }
  const count = values.seeds === undefined ? 1_000 : Number(values.seeds);
  if (!Number.isSafeInteger(count) || count < 1) throw new TypeError(`--seeds is a whole number of schedules, at least 1, not ${JSON.stringify(values.seeds)}`);
  const from = values.from === undefined ? randomInt(0, 0xffffffff - count) : parseSeed(values.from);
  console.log(`dst: ${count} ${values.group === true ? 'lease-group ' : ''}schedules from seed ${hex(from)}`);
  const started = performance.now();
  let shrinkingMs = 0;
  let failures = 0;
  let ran = 0;
  for (let seed = from; seed < from + count && !(values.first === true && failures > 0); seed++) {
    ran++;
    const result = await run({ seed });
    if (result.failures.length === 0) continue;
    failures++;
    const shrinkFrom = performance.now();
    const shrunk = await shrink(result);
    shrinkingMs += performance.now() - shrinkFrom;
    console.log(`dst: seed ${hex(seed)} failed: ${result.failures[0]}; shrunk to ${shrunk.faults.length} of ${result.drawn} faults (${shrunk.result.faults.map((f) => f.replace(/^\d+ ms: \[\d+\] /, '')).join('; ')}); replay: ${replayLine(seed, shrunk.faults)}`);
  }
  // The rate counts the schedules run, not the time spent shrinking failures.
  const seconds = (performance.now() - started - shrinkingMs) / 1000;
  console.log(`dst: ${ran} schedules in ${seconds.toFixed(1)} s (${Math.round((ran / seconds) * 60)} a minute), ${failures} failures`);
  return failures === 0 ? 0 : 1;
}

process.exitCode = await main();
