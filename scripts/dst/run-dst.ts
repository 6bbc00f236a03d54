/**
 * `pnpm dst`: the deterministic simulation (test/dst/schedule.ts), many seeded schedules of the real
 * coordinator, scheduler, guard and handler wrapper in one process on the in-memory stores.
 *
 * - `pnpm dst --seeds N [--from 0x…]`: N schedules from a seed (random unless given); each failure
 *   prints the line that replays it; ends with `dst: N schedules in S s (R a minute), F failures`
 *   and exits 1 on a failure.
 * - `pnpm dst --seed 0x…`: replays one schedule, bit for bit: its faults in order and what it broke.
 *
 * A failing schedule is not shrunk yet: its faults are listed in order instead (two to six of them).
 */
import { randomInt } from 'node:crypto';
import { parseArgs } from 'node:util';
import { runSchedule, type ScheduleResult } from '../../test/dst/schedule.js';

const { values } = parseArgs({ options: { seed: { type: 'string' }, seeds: { type: 'string' }, from: { type: 'string' } } });
const hex = (seed: number) => `0x${seed.toString(16).padStart(8, '0')}`;
const parseSeed = (text: string): number => {
  const seed = Number(text);
  if (!Number.isSafeInteger(seed) || seed < 0 || seed > 0xffffffff) throw new TypeError(`a seed is a number in 0..0xffffffff, not ${JSON.stringify(text)}`);
  return seed;
};

function printFailure(result: ScheduleResult): void {
  console.log(`dst: seed ${hex(result.seed)} failed: ${result.failures[0]}; replay: pnpm dst --seed ${hex(result.seed)}`);
}

async function main(): Promise<number> {
  if (values.seed !== undefined) {
    const result = await runSchedule({ seed: parseSeed(values.seed) });
    console.log(`dst: seed ${hex(result.seed)}: ${result.fires} fires took effect, ${result.elections} elections`);
    for (const fault of result.faults) console.log(`  fault at ${fault}`);
    for (const failure of result.failures) console.log(`  FAILED: ${failure}`);
    console.log(result.failures.length === 0 ? 'dst: passed' : `dst: ${result.failures.length} invariants broken`);
    return result.failures.length === 0 ? 0 : 1;
  }
  const count = values.seeds === undefined ? 1_000 : Number(values.seeds);
  if (!Number.isSafeInteger(count) || count < 1) throw new TypeError(`--seeds is a whole number of schedules, at least 1, not ${JSON.stringify(values.seeds)}`);
  const from = values.from === undefined ? randomInt(0, 0xffffffff - count) : parseSeed(values.from);
  console.log(`dst: ${count} schedules from seed ${hex(from)}`);
  const started = performance.now();
  let failures = 0;
  for (let seed = from; seed < from + count; seed++) {
    const result = await runSchedule({ seed });
    if (result.failures.length > 0) {
      failures++;
      printFailure(result);
    }
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(`dst: ${count} schedules in ${seconds.toFixed(1)} s (${Math.round((count / seconds) * 60)} a minute), ${failures} failures`);
  return failures === 0 ? 0 : 1;
}

process.exitCode = await main();
