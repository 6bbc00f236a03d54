/**
 * How the deterministic simulation fares against the planted bugs (scripts/mutants/planted-bugs.ts)
 * that live in the code it runs: the coordinator, the scheduler, the lease group, the guard, the
 * handler wrapper, the shared wire contract and the in-memory stores (not the Redis, PostgreSQL,
 * etcd, MySQL or HTTP stores: the simulation runs on the in-memory ones). Each bug is planted in its
 * own scratch copy of the repository, as `pnpm mutants` does, and `pnpm dst --first` runs there from
 * seed 1 until the first failing schedule, or the budget: the single lease's schedules, then, if
 * they miss it, the lease group's (`--group`). Prints one table row per bug, for
 * docs/planted-bugs.md, and a summary line.
 *
 *   tsx scripts/dst/dst-vs-bugs.ts [--seeds 1000] [--only id,id] [--group-only]
 *
 * `--group-only`: the lease group's schedules alone (the single lease's measured before).
 *
 * Not part of `pnpm test` (about half a minute a bug).
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { PLANTED_BUGS, type PlantedBug } from '../mutants/planted-bugs.js';
import { plantIn, scratchCopy } from '../scratch-copy.js';
const { values } = parseArgs({ options: { seeds: { type: 'string', default: '1000' }, only: { type: 'string' }, 'group-only': { type: 'boolean' } } });
const seeds = Number(values.seeds);
if (!Number.isSafeInteger(seeds) || seeds < 1) throw new TypeError(`--seeds is a whole number, at least 1, not ${JSON.stringify(values.seeds)}`);

/** The code the simulation runs, and the stores it does not (it runs the in-memory ones). */
const SIMULATED = [/^packages\/coordinator\/src\//, /^packages\/consumer-guard\/src\//, /^packages\/shared\/src\//, /^test\/dst\//];
const NOT_SIMULATED = /\/(redis|postgres|etcd|mysql|http|kysely|sql|queues?|cli|metrics)\/|\.(lua|sql)$|release-polling/;

export function simulated(bug: PlantedBug): boolean {
  return SIMULATED.some((re) => re.test(bug.file)) && !NOT_SIMULATED.test(bug.file);
}

function runOne(bug: PlantedBug): string {
  const scratch = scratchCopy(`fenced-dst-${bug.id}-`);
  try {
    const notPlanted = plantIn(scratch, bug);
    if (notPlanted !== undefined) return `does not apply: ${notPlanted}`;
    const single = values['group-only'] === true ? undefined : runKind(scratch, []);
    if (single !== undefined && !single.startsWith('not in')) return single;
    const group = runKind(scratch, ['--group']).replace(/^caught, seed/, 'caught by the lease group, seed');
    return single !== undefined && group.startsWith('not in') ? `not in ${seeds} seeds of either` : group;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** `pnpm dst --first` from seed 1 in `scratch`, one kind of schedule: its verdict on the bug. */
function runKind(scratch: string, kind: readonly string[]): string {
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', 'scripts/dst/run-dst.ts', ...kind, '--seeds', String(seeds), '--from', '1', '--first'], { cwd: scratch, encoding: 'utf8', timeout: 15 * 60_000 });
  const out = `${run.stdout}\n${run.stderr}`;
  const summary = /dst: (\d+) schedules in ([\d.]+) s/.exec(out);
  const failure = /dst: seed 0x([0-9a-f]+) failed: (.*?); shrunk/.exec(out);
  if (failure !== null && summary !== null) return `caught, seed ${Number.parseInt(failure[1]!, 16)} (${summary[2]} s): ${failure[2]!.replace(/,? from ledger@\S+ on/, '').replace(/ \(since .*\)$/, '')}`;
  if (summary !== null && run.status === 0) return `not in ${seeds} seeds`;
  return `no verdict: the simulation ${run.signal === null ? `exited ${run.status}` : `was ended by ${run.signal}`}: ${out.trim().split('\n').slice(-2).join(' ').slice(0, 200)}`;
}

const only = values.only?.split(',');
const bugs = PLANTED_BUGS.filter((bug) => (only === undefined ? simulated(bug) : only.includes(bug.id)));
let caught = 0;
console.log(`dst vs planted bugs: ${bugs.length} bugs in the code the simulation runs, ${seeds} seeds each at most`);
console.log('| bug | deterministic simulation (`pnpm dst`) |\n| --- | --- |');
for (const bug of bugs) {
  const verdict = runOne(bug);
  if (verdict.startsWith('caught')) caught++;
  console.log(`| \`${bug.id}\` | ${verdict} |`);
}
console.log(`dst vs planted bugs: ${caught} of ${bugs.length} caught`);
