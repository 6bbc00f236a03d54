import { randomBytes } from 'node:crypto';
import { accessSync, constants, existsSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { machineHas, runnableHere } from './machine-support.js';
import { killTrackedChildren, runTrackedCleanups } from '../process/child-registry.js';
import { COLUMN_DEFINITIONS, renderHtmlReport, RESULT_COLUMNS, resultTableRows, type ReportRun } from '../report/html-report.js';
import { keepRun, keptRunsRoot } from '../report/kept-runs.js';
import { harnessFailures, verdictOf } from '../report/verdict.js';
import { textTable } from '../report/text-table.js';
import { runScenario, scenarioLabel, type RunResult, type RunStatus } from '../sim/run-scenario.js';
import { phaseTimeLine } from '../report/phase-time.js';
import { SCENARIO_NAMES, scenarios, type ScenarioName } from '../sim/scenarios.js';
import type { SimApp, SimMode } from '../sim/sim-app.js';
import { resolvePostgres, ServiceUnavailableError } from '../postgres-url.js';
import { parseSimArgs, USAGE, UsageError } from './parse-args.js';

export interface CliIo {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  readonly isTTY: boolean;
  readonly env: NodeJS.ProcessEnv;
  /**
   * Installs the handler for SIGINT/SIGTERM and returns its removal. The default ends every process
   * the run started (SIGCONT then SIGKILL: a frozen replica too), says so, and exits 130 or 143.
   */
  readonly onInterrupt?: (handler: (signal: NodeJS.Signals) => void) => () => void;
}

/**
 * Finds the database the runs use, once the command line was read: its URL, and how to stop what
 * was started for it. Throws `ServiceUnavailableError` (one line, exit 2) when there is none; says
 * which it chose with `say` where that is not obvious.
 * @defaultValue DATABASE_URL, else the local server on 5432 (see postgres-url.ts)
 */
export type DatabaseResolver = (env: NodeJS.ProcessEnv, say: (line: string) => void) => Promise<{ url: string; stop: () => Promise<void> }>;

const defaultIo: CliIo = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  isTTY: process.stderr.isTTY === true,
  env: process.env,
  onInterrupt: (handler) => {
    process.once('SIGINT', handler);
    process.once('SIGTERM', handler);
    return () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    };
  },
};

/**
 * The scenarios `app` can run: those it names (all when it names none), less those that need what it
 * lacks (a service to fault, replicas that hold their pool: `Scenario.needs`).
 */
export function scenariosOf(app: SimApp): readonly ScenarioName[] {
  const has = { service: app.faultService !== undefined, pool: app.replicasHoldPool === true };
  return (app.scenarios ?? SCENARIO_NAMES).filter((name) => scenarios[name].needs === undefined || has[scenarios[name].needs!]);
}

/** `--help`: the usage, the scenarios, and what each column of the table means. */
function helpText(): string {
  const width = Math.max(...COLUMN_DEFINITIONS.map(([c]) => c.length));
  const nameWidth = Math.max(...SCENARIO_NAMES.map((name) => name.length));
  return [
    USAGE,
    '',
    'Runs each scenario twice with the same seed: guarded (the app with its protections) and control (without).',
    'Exit 0 when every guarded run is clean and every control shows damage; 1 when a run failed; 3 when none failed but some could not be',
    'judged (inconclusive: the machine starved the processes of CPU, measured, too long to judge timing; safety is always judged); 2 for',
    'bad input or a missing service.',
    '',
    'scenarios:',
    ...SCENARIO_NAMES.map((name) => `  ${name.padEnd(nameWidth + 2)}${scenarios[name].summary}`),
    '',
    'columns of the table:',
    ...COLUMN_DEFINITIONS.map(([column, meaning]) => `  ${column.padEnd(width + 2)}${meaning}`),
  ].join('\n');
}

/** Why the report cannot be written at `path`, or undefined when it can. */
function unwritableReport(path: string): string | undefined {
  const dir = dirname(path);
  if (!existsSync(dir)) return `the folder ${dir} does not exist`;
  if (!statSync(dir).isDirectory()) return `${dir} is not a folder`;
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    return `the folder ${dir} is not writable`;
  }
  if (existsSync(path) && statSync(path).isDirectory()) return `${path} is a folder`;
  return undefined;
}

/** Lease and schedule timings of simulated replicas: short, so that faults bite within seconds. */
const TIMINGS = { ttlMs: 1000, renewIntervalMs: 250, everyMs: 250 };

/**
 * `pnpm sim`: runs each scenario guarded and unguarded (the control) with the same seed, prints one
 * table row per run, writes the HTML report. Exit 0 when every guarded run is clean and every control
 * shows damage; 1 when a run failed; 3 when none failed but some were inconclusive (see `verdictOf`);
 * 2 for a usage or set-up problem (one line naming the fix).
 */
export async function runSimCli(app: SimApp, argv: readonly string[], io: CliIo = defaultIo, database: DatabaseResolver = resolvePostgres): Promise<number> {
  let args;
  try {
    args = parseSimArgs(argv, () => Math.floor(Math.random() * 2 ** 31), scenariosOf(app), app.leaseStores ?? ['redis']);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`sim: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (args.help) {
    io.out(`${helpText()}\n`);
    return 0;
  }
  // Before minutes of runs, not after: a report that cannot be written would lose the table too.
  if (args.report !== undefined) {
    const problem = unwritableReport(resolve(args.report));
    if (problem !== undefined) {
      io.err(`sim: --report ${args.report}: ${problem}\n`);
      return 2;
    }
  }

  // Run what this machine can run, and say what was left out and why (a machine with nothing but
  // Node runs the scenarios that need neither Redis nor servers of their own: the PostgreSQL lease store's).
  const { runnable, leftOut } = runnableHere(app, args.targets, machineHas());
  if (leftOut !== undefined) io.err(`sim: ${leftOut}\n`);
  if (runnable.length === 0) return 2;
  args = { ...args, targets: runnable, scenarios: [...new Set(runnable.map((t) => t.scenario))] };
  let postgres;
  try {
    postgres = await database(io.env, (line) => io.err(`sim: ${line}\n`));
  } catch (err) {
    if (err instanceof ServiceUnavailableError) {
      io.err(`sim: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  // Something answers on the port; make sure the app can really use that database (it exists, the
  // user may create a schema) before spending minutes on runs that would all fail the same way.
  const probe = await probeDatabase(app, postgres.url);
  if (probe !== undefined) {
    await postgres.stop();
    io.err(`sim: cannot use PostgreSQL at ${io.env['DATABASE_URL'] ? 'DATABASE_URL' : postgres.url}: ${probe}; set DATABASE_URL to a database you can create schemas in\n`);
    return 2;
  }

  // Ctrl-C (or a SIGTERM) must leave nothing behind: a replica frozen by a pause fault would ignore a
  // polite signal forever, so every process of the run is continued and killed, at once.
  const removeInterrupt = (io.onInterrupt ?? defaultIo.onInterrupt!)((signal) => {
    const ended = killTrackedChildren();
    io.err(`\nsim: interrupted (${signal}); ended the run's ${ended} processes (replicas and Redis), removing its schema\n`);
    void runTrackedCleanups(5000)
      .then(() => postgres.stop())
      .finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  });

  const total = args.targets.length * 2;
  // Start-up and settling around the fault time, per run, as measured on two cores: a Cluster or
  // Sentinel run also waits for its deployment, its failovers and a deposed primary's demotion.
  const overheadMs = (name: ScenarioName) => (scenarios[name].redis === 'cluster' || scenarios[name].redis === 'sentinel' ? 25_000 : 7_000);
  const estimateMs = args.targets.reduce((sum, { scenario }) => sum + 2 * (Math.max(args.durationMs, scenarios[scenario].leastFaultMs ?? 0) + overheadMs(scenario)), 0);
  io.err(
    `sim: ${args.targets.map((t) => scenarioLabel(t.scenario, t.leaseStore)).join(', ')}; ${args.replicas} replicas; ${Math.round(args.durationMs / 1000)} s of faults per run, guarded and control; seed ${args.seed}\n` +
      `sim: replay with --seed ${args.seed}; about ${Math.ceil(estimateMs / args.parallel / 60_000)} min${args.parallel > 1 ? `, ${args.parallel} runs at a time` : ''}\n`,
  );
  /** Every run, in the order of the table: each scenario on each store, guarded then control. */
  const jobs = args.targets.flatMap(({ scenario, leaseStore }) => (['guarded', 'control'] as SimMode[]).map((mode) => ({ scenario, leaseStore, mode })));
  /** Each run's row and whole result, at its job's place (runs in parallel finish in any order). */
  const finished: Array<{ run: ReportRun; result: RunResult } | undefined> = jobs.map(() => undefined);
  let lastPrinted = 0;
  const progress = (index: number) => (status: RunStatus) => {
    const text = `[${index}/${total}] ${status.scenario} ${status.mode}: ${status.phase}, ${Math.round(status.elapsedMs / 1000)} s of ~${Math.round(status.durationMs / 1000) + 10} s, leader ${status.leader ?? 'none'}${status.token ? ` (token ${status.token})` : ''}`;
    if (io.isTTY) io.err(`\r\x1b[K${text}`);
    else if (Date.now() - lastPrinted >= 5000) {
      lastPrinted = Date.now();
      io.err(`${text}\n`);
    }
  };
  /** Runs job `at` and records its row. */
  const runJob = async (at: number) => {
    const { scenario: name, leaseStore, mode } = jobs[at]!;
    const result = await runScenario(app, scenarios[name], mode, {
      leaseStore,
      databaseUrl: postgres.url,
      replicas: args.replicas,
      durationMs: args.durationMs,
      seed: args.seed,
      ...TIMINGS,
      onProgress: progress(at + 1),
    });
    if (io.isTTY) io.err('\r\x1b[K');
    const run: ReportRun = { ...result, events: result.history.events, summary: scenarios[name].summary, exercises: scenarios[name].exercises };
    finished[at] = { run, result };
    const [row] = resultTableRows([run]);
    io.err(`[${at + 1}/${total}] ${row![0]} ${row![1]}: ${row![row!.length - 1]}\n`);
    const verdict = verdictOf(run);
    if (mode === 'guarded' && !verdict.ok) {
      for (const v of verdict.inconclusive ? (result.check.inconclusive?.violations ?? []) : result.check.violations) io.err(`  ${v}\n`);
    }
  };

  try {
    // In batches that start together and end together (with --parallel 2, a scenario's guarded run
    // beside its control): their start-up (servers, replicas loading) and teardown coincide, so no
    // run's fault time shares the machine with another run's busiest phases.
    for (let from = 0; from < jobs.length; from += args.parallel) {
      const batch = jobs.slice(from, from + args.parallel).map((_, i) => runJob(from + i));
      // Settled, not all: a run that throws must not stop the database under the runs still going.
      for (const end of await Promise.allSettled(batch)) if (end.status === 'rejected') throw end.reason;
    }
  } finally {
    removeInterrupt();
    await postgres.stop();
  }
  const runs = finished.map((f) => f!.run);
  /** The runs' whole results, beside their rows: a failed one is kept with its history and logs. */
  const results = new Map(finished.map((f) => [f!.run, f!.result]));

  const reportPath = args.report === undefined ? join(mkdtempSync(join(tmpdir(), 'fenced-sim-')), 'sim-report.html') : resolve(args.report);
  const command = `pnpm sim ${argv.join(' ')}`.trim();
  const reportHtml = renderHtmlReport(runs, { title: `fenced split-brain simulation (${app.name})`, generatedAt: new Date(), command });
  writeFileSync(reportPath, reportHtml);
  const failed = (r: ReportRun) => !verdictOf(r).ok && !verdictOf(r).inconclusive;
  const guardedBad = runs.filter((r) => r.mode === 'guarded' && failed(r));
  // A control without damage: the faults did not bite (a guarded run that missed its protection is in guardedBad, as toothless);
  // or one whose harness failed mid-run.
  const undamagedControls = runs.filter((r) => r.mode === 'control' && failed(r));
  const inconclusive = runs.filter((r) => verdictOf(r).inconclusive);
  // Each failed or inconclusive run is kept, whole, where it can be read after this process and its
  // temporary folders are gone (CI keeps only the tail of the output): why a run missed is worth as
  // much reading as why one failed.
  const kept = new Map<ReportRun, string>();
  for (const r of [...guardedBad, ...undamagedControls, ...inconclusive]) {
    try {
      kept.set(r, keepRun(keptRunsRoot(io.env), { run: results.get(r)!, verdict: verdictOf(r).text, command, reportHtml }));
    } catch (err) {
      io.err(`sim: could not keep the failed run ${r.scenario} ${r.mode}: ${err instanceof Error ? err.message : String(err)}\n`);
    }
  }
  const ok = guardedBad.length === 0 && undamagedControls.length === 0;
  io.err(`${phaseTimeLine([...results.values()])}\n`);

  if (args.json) {
    io.out(
      `${JSON.stringify(
        {
          seed: args.seed,
          report: reportPath,
          runs: runs.map((r) => ({ scenario: r.scenario, mode: r.mode, verdict: verdictOf(r).text, ...r.check, overlaps: r.check.overlaps.length, marks: r.check.marks.length, phaseMs: results.get(r)!.phaseMs, ...(kept.has(r) ? { kept: kept.get(r) } : {}) })),
          ok,
          inconclusive: inconclusive.length,
        },
        null,
        2,
      )}\n`,
    );
  } else {
    io.out(`${textTable(RESULT_COLUMNS, resultTableRows(runs))}\n\n`);
    io.out(`report: ${reportPath}\n`);
    const keptIn = (r: ReportRun) => (kept.has(r) ? `; kept in ${kept.get(r)}` : '');
    for (const r of guardedBad) io.out(`FAIL ${r.scenario}: ${verdictOf(r).text} with the guard on (seed ${args.seed}${keptIn(r)})\n`);
    for (const r of undamagedControls) {
      const text = verdictOf(r).text;
      if (harnessFailures(r).length > 0) io.out(`FAIL ${r.scenario} control: ${text} (seed ${args.seed}${keptIn(r)})\n`);
      else io.out(`FAIL ${r.scenario}: the control shows no damage, so this run did not exercise what the scenario claims (seed ${args.seed}${keptIn(r)})\n`);
    }
    for (const r of inconclusive) io.out(`INCONCLUSIVE ${r.scenario} ${r.mode}: ${verdictOf(r).text.replace(/^inconclusive: /, '')} (seed ${args.seed}; safety was judged and held${keptIn(r)})\n`);
    if (ok && inconclusive.length === 0) io.out(`ok: every guarded run is clean and every control shows the damage (seed ${args.seed})\n`);
    else if (ok) io.out(`no failure, ${inconclusive.length} of ${runs.length} runs inconclusive (each line above says why: the machine starved the simulation of CPU too long to judge timing, or a fault missed its precondition); run them again, on a quieter machine if starved (seed ${args.seed})\n`);
  }
  return !ok ? 1 : inconclusive.length > 0 ? 3 : 0;
}

/** Prepares and cleans up a throwaway run: undefined when the app can use the database, else why not (one line). */
async function probeDatabase(app: SimApp, databaseUrl: string): Promise<string | undefined> {
  const run = {
    id: `sim_probe_${randomBytes(3).toString('hex')}`,
    mode: 'guarded',
    databaseUrl,
    ...TIMINGS,
    scenario: 'probe',
    controlClock: 'server',
    leaseStore: 'redis',
  } as const;
  try {
    await app.prepare(run);
    return undefined;
  } catch (err) {
    return (err instanceof Error ? err.message : String(err)).split('\n')[0];
  } finally {
    await app.cleanup(run).catch(() => undefined);
  }
}

