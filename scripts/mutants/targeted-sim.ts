/**
 * The second net of `pnpm mutants`: one short guarded run of the scenario that targets a planted bug
 * (run in the bug's scratch copy by run-mutants.ts). Prints one JSON line: whether the run was clean
 * and its verdict; exits 0 either way (the caller judges).
 *
 * Usage: tsx --conditions=@fenced/source scripts/mutants/targeted-sim.ts <scenario>
 */
import { resolvePostgres, runScenario, scenarios, SCENARIO_NAMES, verdictOf, type ScenarioName } from '@fenced/chaos';
import { ledgerApp } from '../../examples/ledger-sim/app.js';

const name = process.argv[2] as ScenarioName;
if (!SCENARIO_NAMES.includes(name)) {
  process.stderr.write(`targeted-sim: no scenario ${JSON.stringify(name)}; choose from ${SCENARIO_NAMES.join(', ')}\n`);
  process.exit(2);
}
const postgres = await resolvePostgres();
try {
  const scenario = scenarios[name];
  // The seed the suite's own sim test uses, and its duration: a schedule known to land every aim.
  const result = await runScenario(ledgerApp, scenario, 'guarded', { databaseUrl: postgres.url, replicas: 3, durationMs: 6000, seed: 7, ttlMs: 1000, renewIntervalMs: 250, everyMs: 250 });
  const verdict = verdictOf({ mode: 'guarded', check: result.check, exercises: scenario.exercises });
  process.stdout.write(`${JSON.stringify({ clean: verdict.ok, inconclusive: verdict.inconclusive, verdict: verdict.text, violations: result.check.violations.slice(0, 3) })}\n`);
} finally {
  await postgres.stop();
}
