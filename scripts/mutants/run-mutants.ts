/**
 * `pnpm mutants`: applies each planted bug (planted-bugs.ts) to its own scratch copy of the
 * repository, runs the tests that must catch it there, and, for a bug that names a scenario, one short
 * guarded simulation run of it (targeted-sim.ts), which must not come out clean. Prints a table: the
 * bug, its layer, the test that failed on it (or MISSED) and the simulation's verdict. Exits 1 when a
 * bug survived either net, or no longer applies.
 *
 * `pnpm mutants --only id,id` runs some of them. Not part of `pnpm test`: each bug runs its tests
 * on their own (about half a minute to a minute each on two cores).
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { firstFailure, plantIn, scratchCopy } from '../scratch-copy.js';
import { PLANTED_BUGS, type PlantedBug } from './planted-bugs.js';

interface Outcome {
  readonly bug: PlantedBug;
  readonly verdict: 'caught' | 'MISSED' | 'does not apply';
  /** The first test that failed on it (file › name), or why it did not apply. */
  readonly by: string;
  /** The targeted simulation's verdict on it: caught (its guarded run not clean), MISSED, or none asked. */
  readonly sim: string;
  readonly seconds: number;
}

function runOne(bug: PlantedBug): Outcome {
  const started = performance.now();
  const scratch = scratchCopy(`fenced-mutant-${bug.id}-`);
  const seconds = () => Math.round((performance.now() - started) / 1000);
  try {
    const notPlanted = plantIn(scratch, bug);
    if (notPlanted !== undefined) return { bug, verdict: 'does not apply', by: notPlanted, sim: '', seconds: seconds() };
    const report = join(scratch, 'mutant-report.json');
    spawnSync(join(scratch, 'node_modules', '.bin', 'vitest'), ['run', '--project', 'unit', '--reporter=json', `--outputFile=${report}`, ...bug.tests], {
      cwd: scratch,
      env: { ...process.env, CI: 'true' },
      encoding: 'utf8',
      timeout: 10 * 60_000,
    });
    return { bug, ...caughtBy(report, scratch), sim: bug.sim === undefined ? '-' : targetedSim(scratch, bug.sim), seconds: seconds() };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Runs the bug's scenario once, guarded, in the scratch copy: caught when the run is not clean. */
function targetedSim(scratch: string, scenario: string): string {
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', 'scripts/mutants/targeted-sim.ts', scenario], {
    cwd: scratch,
    env: process.env,
    encoding: 'utf8',
    timeout: 5 * 60_000,
  });
  const line = run.stdout.trim().split('\n').at(-1) ?? '';
  try {
    const { clean, inconclusive, verdict } = JSON.parse(line) as { clean: boolean; inconclusive?: boolean; verdict: string };
    // A run the machine starved too long to judge caught nothing: say so rather than count it.
    if (inconclusive === true) return `MISSED (${scenario}: ${verdict}; run it again on a quieter machine)`;
    return clean ? `MISSED (${scenario}: clean)` : `caught (${scenario}: ${verdict})`;
  } catch {
    return `MISSED (${scenario} did not run: ${(run.stderr || run.stdout).trim().split('\n').at(-1) ?? ''})`;
  }
}

/** Caught when a test failed on the bug; a run that wrote no report is a failure to look at, not a catch. */
function caughtBy(report: string, scratch: string): { verdict: Outcome['verdict']; by: string } {
  const result = firstFailure(report, scratch);
  if (result.kind === 'failed') return { verdict: 'caught', by: result.by };
  return { verdict: 'MISSED', by: result.kind === 'passed' ? 'every test passed' : 'vitest wrote no report (see its output by running the tests by hand)' };
}

const { values } = parseArgs({ options: { only: { type: 'string' } } });
const only = values.only?.split(',').map((s) => s.trim());
const unknown = (only ?? []).filter((id) => !PLANTED_BUGS.some((b) => b.id === id));
if (unknown.length > 0) {
  process.stderr.write(`mutants: no planted bug ${unknown.join(', ')}; choose from ${PLANTED_BUGS.map((b) => b.id).join(', ')}\n`);
  process.exit(2);
}
const bugs = PLANTED_BUGS.filter((b) => only === undefined || only.includes(b.id));
const outcomes: Outcome[] = [];
const started = performance.now();
for (const [i, bug] of bugs.entries()) {
  process.stderr.write(`[${i + 1}/${bugs.length}] ${bug.id} …\n`);
  const outcome = runOne(bug);
  outcomes.push(outcome);
  process.stderr.write(`[${i + 1}/${bugs.length}] ${bug.id}: ${outcome.verdict}${outcome.sim === '-' ? '' : `, sim ${outcome.sim}`} (${outcome.seconds} s)\n`);
}

const rows = outcomes.map((o) => [o.bug.id, o.bug.layer, o.verdict, o.sim, o.by]);
const header = ['bug', 'layer', 'verdict', 'targeted sim', 'caught by'];
const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c]!.length)));
const line = (cells: string[]) => cells.map((cell, c) => (c === cells.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  ');
process.stdout.write(`${[line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n')}\n\n`);
// Caught by its tests, and by its targeted simulation when it names one.
const caught = outcomes.filter((o) => o.verdict === 'caught' && !o.sim.startsWith('MISSED')).length;
process.stdout.write(`${caught} of ${outcomes.length} planted bugs caught (${Math.round((performance.now() - started) / 1000)} s)\n`);
process.exit(caught === outcomes.length ? 0 : 1);
