import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { findLibfaketime } from '../clock/faketime.js';
import { renderHtmlReport, RESULT_COLUMNS, resultTableRows, type ReportRun } from '../report/html-report.js';
import { textTable } from '../report/text-table.js';
import { runScenario, type RunStatus } from '../sim/run-scenario.js';
import { scenarios } from '../sim/scenarios.js';
import type { SimApp, SimMode } from '../sim/sim-app.js';
import { resolvePostgres, ServiceUnavailableError } from '../services/postgres-url.js';
import { parseSimArgs, USAGE, UsageError } from './parse-args.js';

export interface CliIo {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  readonly isTTY: boolean;
  readonly env: NodeJS.ProcessEnv;
}

const defaultIo: CliIo = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  isTTY: process.stderr.isTTY === true,
  env: process.env,
};

/** Lease and schedule timings of simulated replicas: short, so that faults bite within seconds. */
const TIMINGS = { ttlMs: 1000, renewMs: 250, everyMs: 250 };

/**
 * `pnpm sim`: runs each scenario guarded and unguarded (the control) with the same seed, prints one
 * table row per run, writes the HTML report. Exit 0 when every guarded run is clean and every control
 * shows damage; 1 when not; 2 for a usage or set-up problem (one line naming the fix).
 */
export async function runSimCli(app: SimApp, argv: readonly string[], io: CliIo = defaultIo): Promise<number> {
  let args;
  try {
    args = parseSimArgs(argv, () => Math.floor(Math.random() * 2 ** 31));
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`sim: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  if (args.help) {
    io.out(`${USAGE}\n`);
    return 0;
  }

  if (spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status !== 0) {
    io.err('sim: redis-server not found on PATH: install Redis (apt-get install redis-server), the simulation starts its own\n');
    return 2;
  }
  if (args.scenarios.some((s) => scenarios[s].clockFault !== undefined) && findLibfaketime() === undefined) {
    io.err('sim: clock scenarios need libfaketime: apt-get install faketime (or leave out --scenario clock-skew,slow-clock)\n');
    return 2;
  }
  let postgres;
  try {
    postgres = await resolvePostgres(io.env);
  } catch (err) {
    if (err instanceof ServiceUnavailableError) {
      io.err(`sim: ${err.message}\n`);
      return 2;
    }
    throw err;
  }

  const total = args.scenarios.length * 2;
  io.err(
    `sim: ${args.scenarios.join(', ')}; ${args.replicas} replicas; ${Math.round(args.durationMs / 1000)} s of faults per run, guarded and control; seed ${args.seed}\n` +
      `sim: replay with --seed ${args.seed}; about ${Math.ceil((total * (args.durationMs + 14_000)) / 60_000)} min\n`,
  );
  const runs: ReportRun[] = [];
  let index = 0;
  let lastPrinted = 0;
  const progress = (status: RunStatus) => {
    const text = `[${index}/${total}] ${status.scenario} ${status.mode}: ${status.phase}, ${Math.round(status.elapsedMs / 1000)} s of ~${Math.round(status.durationMs / 1000) + 10} s, leader ${status.leader ?? 'none'}${status.token ? ` (token ${status.token})` : ''}`;
    if (io.isTTY) io.err(`\r\x1b[K${text}`);
    else if (Date.now() - lastPrinted >= 5000) {
      lastPrinted = Date.now();
      io.err(`${text}\n`);
    }
  };

  try {
    for (const name of args.scenarios) {
      for (const mode of ['guarded', 'control'] as SimMode[]) {
        index++;
        const result = await runScenario(app, scenarios[name], mode, {
          databaseUrl: postgres.url,
          replicas: args.replicas,
          durationMs: args.durationMs,
          seed: args.seed,
          ...TIMINGS,
          onProgress: progress,
        });
        if (io.isTTY) io.err('\r\x1b[K');
        const run: ReportRun = { ...result, events: result.history.events, summary: scenarios[name].summary };
        runs.push(run);
        const [row] = resultTableRows([run]);
        io.err(`[${index}/${total}] ${row![0]} ${row![1]}: ${row![row!.length - 1]}\n`);
        if (mode === 'guarded' && result.check.anomalies > 0) {
          for (const v of result.check.violations) io.err(`  ${v}\n`);
        }
      }
    }
  } finally {
    await postgres.stop();
  }

  const reportPath = resolve(args.report);
  writeFileSync(reportPath, renderHtmlReport(runs, { title: `fenced split-brain simulation (${app.name})`, generatedAt: new Date(), command: `pnpm sim ${argv.join(' ')}`.trim() }));
  const guardedBad = runs.filter((r) => r.mode === 'guarded' && r.check.anomalies > 0);
  const toothless = runs.filter((r) => r.mode === 'control' && r.check.anomalies === 0);

  if (args.json) {
    io.out(
      `${JSON.stringify(
        {
          seed: args.seed,
          report: reportPath,
          runs: runs.map((r) => ({ scenario: r.scenario, mode: r.mode, ...r.check, overlaps: r.check.overlaps.length })),
          ok: guardedBad.length === 0 && toothless.length === 0,
        },
        null,
        2,
      )}\n`,
    );
  } else {
    io.out(`${textTable(RESULT_COLUMNS, resultTableRows(runs))}\n\n`);
    io.out(`report: ${reportPath}\n`);
    for (const r of guardedBad) io.out(`FAIL ${r.scenario}: ${r.check.anomalies} anomalies with the guard on (seed ${args.seed})\n`);
    for (const r of toothless) io.out(`FAIL ${r.scenario}: the control shows no damage, so this run did not exercise what the scenario claims (seed ${args.seed})\n`);
    if (guardedBad.length === 0 && toothless.length === 0) io.out(`ok: every guarded run is clean and every control shows the damage (seed ${args.seed})\n`);
  }
  return guardedBad.length === 0 && toothless.length === 0 ? 0 : 1;
}
