import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { leaseStoresOf, RESULT_COLUMNS, runScenario, scenarioLabel, scenarios, scenariosOf, SCENARIO_NAMES } from '@fenced/chaos';
import { judgedSimulation, testDatabaseUrl } from '#test-support';
import { describe, expect, it } from 'vitest';
import { ledgerApp } from '../../examples/ledger-sim/app.js';
import { regressions } from './regressions.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'fenced-sim-'));
/** Set by the full run: where `pnpm sim` said it wrote the report (no --report given). */
let reportPath = '';
/** Guarded runs the machine starved too long to judge: judged again alone by the every-scenario test. */
let unjudgedGuarded = 0;
const SEED = 7;
/** What `pnpm sim` runs by default: every scenario on Redis, the replica and PostgreSQL faults on the PostgreSQL lease store too, and pause on etcd and MySQL. */
const DEFAULT_RUNS = scenariosOf(ledgerApp).flatMap((s) => leaseStoresOf(scenarios[s]).default.map((store) => scenarioLabel(s, store)));

interface CliRun {
  scenario: string;
  mode: 'guarded' | 'control';
  verdict: string;
  anomalies: number;
  staleRefused: number;
  violations: string[];
  /** Where a failed run was kept. */
  kept?: string;
}

/** Runs `pnpm sim` as a user would (the same entry point), with a short duration. */
function sim(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', 'examples/ledger-sim/sim.ts', ...args], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: testDatabaseUrl(), ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    // 'close', not 'exit': the process may exit before its last output has been read.
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * A scenario whose run came out inconclusive, run again alone (judgedSimulation: until judged, up to
 * three times, on the next seeds): an inconclusive run proves nothing about timing, so it must not
 * let the scenario pass. Returns the last runs.
 */
async function judgedAgain(label: string): Promise<CliRun[]> {
  const [scenario, leaseStore = 'redis'] = label.split('@') as [string, string?];
  const { summary } = await judgedSimulation((seed) => sim(['--scenario', scenario, '--lease-store', leaseStore, '--duration', '6s', '--seed', String(seed), '--replicas', '3', '--json']), SEED + 1);
  return summary.runs as unknown as CliRun[];
}

describe('pnpm sim', () => {
  it('refuses bad input with one line naming the fix and exit code 2', async () => {
    const store = await sim(['--scenario', 'redis-failover', '--lease-store', 'postgres']);
    expect(store.code).toBe(2);
    expect(store.stderr.trim().split('\n')).toHaveLength(1);
    expect(store.stderr).toContain('none of the scenarios chosen runs on the postgres lease store');
    const unknownStore = await sim(['--lease-store', 'consul']);
    expect(unknownStore.code).toBe(2);
    expect(unknownStore.stderr).toContain('--lease-store must be redis, postgres, etcd, mysql, default or all, not "consul"');
    const unknown = await sim(['--scenario', 'meteor']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.trim().split('\n')).toHaveLength(1);
    expect(unknown.stderr).toContain(`unknown scenario "meteor": choose from ${[...scenariosOf(ledgerApp), 'all'].join(', ')}`);
    const duration = await sim(['--duration', 'soon']);
    expect(duration.code).toBe(2);
    expect(duration.stderr).toMatch(/bad duration "soon"/);
    // Too short to show any protection (pause at 3 s was toothless), and a value that starts with a
    // dash: each one line, exit 2, nothing run.
    for (const [args, pattern] of [
      [['--scenario', 'pause', '--duration', '3s'], /duration 3s is too short: at least 6s/],
      [['--duration', '-5s'], /argument is ambiguous/],
      [['--parallel', '0'], /--parallel must be a whole number from 1 to 8, not 0/],
      [['--scenario', 'pause', '--report', '/nonexistent/dir/x.html'], /--report \/nonexistent\/dir\/x.html: the folder \/nonexistent\/dir does not exist/],
    ] as const) {
      const refused = await sim([...args]);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr.trim().split('\n')).toHaveLength(1);
      expect(refused.stderr).toMatch(pattern);
    }
  });

  it.each([
    ['a malformed DATABASE_URL', 'not a url', /^sim: DATABASE_URL is not a valid URL/],
    ['a database that does not exist', 'postgres://postgres@127.0.0.1:5432/fenced_no_such_db', /^sim: cannot use PostgreSQL at DATABASE_URL: database "fenced_no_such_db" does not exist; set DATABASE_URL/],
    ['a database that is not on loopback', 'postgres://postgres@10.0.0.1:5432/test', /^sim: the simulation only sends traffic to loopback/],
  ])('%s: one line naming the fix, exit 2, no stack trace', async (_label, url, message) => {
    const result = await sim(['--scenario', 'pause'], { DATABASE_URL: url });
    expect(result.code).toBe(2);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(message);
  });

  it('--help names the scenarios and defines every column of the table', async () => {
    const help = await sim(['--help']);
    expect(help.code).toBe(0);
    for (const name of SCENARIO_NAMES) expect(help.stdout).toMatch(new RegExp(`^  ${name} +\\S`, 'm'));
    for (const column of RESULT_COLUMNS) expect(help.stdout).toMatch(new RegExp(`^  ${column} +\\S`, 'm'));
  });

  it(
    'every scenario: zero anomalies guarded, damage in the unguarded control, same seed',
    async () => {
      const rootReport = join(root, 'sim-report.html');
      const rootReportBefore = existsSync(rootReport) ? statSync(rootReport).mtimeMs : undefined;
      // Four runs at a time (two scenarios, each guarded run beside its control, started and awaited
      // together): most of a run's wall time is its faults waiting on real time (the machine stood
      // three-quarters idle at two at a time), and the starvation each run measured is judged as
      // always. Measured on two cores: quiet 320 s at two, 209 s at four; 236 s at four beside four
      // CPU hogs; at most 1,120, 1,171 and 1,317 ms of starvation measured in a run.
      const result = await sim(['--scenario', 'all', '--duration', '6s', '--seed', String(SEED), '--replicas', '3', '--parallel', '4', '--json']);
      let summary: { ok: boolean; runs: CliRun[]; report: string };
      try {
        summary = JSON.parse(result.stdout) as typeof summary;
      } catch {
        throw new Error(`pnpm sim printed no summary (exit ${result.code}); its stderr ends:\n${result.stderr.slice(-4000)}`);
      }
      // Without --report, the report goes to a temporary folder (the path is printed), never into the
      // working directory.
      reportPath = summary.report;
      expect(reportPath.startsWith(tmpdir())).toBe(true);
      expect(existsSync(rootReport) ? statSync(rootReport).mtimeMs : undefined).toBe(rootReportBefore);
      // A failed run names the folder it was kept in (history, check, every replica's log, the report).
      const table = summary.runs.map((r) => `${r.scenario} ${r.mode}: ${r.verdict} ${r.mode === 'guarded' ? r.violations.join('; ') : ''}${r.kept ? ` (kept in ${r.kept})` : ''}`);
      expect(summary.runs.map((r) => `${r.scenario} ${r.mode}`)).toEqual(DEFAULT_RUNS.flatMap((s) => [`${s} guarded`, `${s} control`]));
      expect(DEFAULT_RUNS.filter((s) => s.endsWith('@postgres')).length).toBeGreaterThanOrEqual(5);
      expect(DEFAULT_RUNS).toContain('pause@etcd');
      expect(DEFAULT_RUNS).toContain('pause@mysql');
      // No run failed; a run the machine starved too long to judge its timing (inconclusive) is run
      // again alone below, so that no scenario passes on an inconclusive run alone.
      // CI keeps only the first line of a failed assertion: it names the runs that failed, and why.
      const failedRuns = summary.runs.filter((r) => (r.mode === 'guarded' ? r.verdict !== 'no anomaly' : r.anomalies === 0) && !r.verdict.startsWith('inconclusive'));
      const failedLine = failedRuns.map((r) => `${r.scenario} ${r.mode}: ${r.verdict}${r.violations.length > 0 ? ` (${r.violations[0]}${r.violations.length > 1 ? ` and ${r.violations.length - 1} more` : ''})` : ''}`).join('; ');
      expect(summary.ok, `failed: ${failedLine}\n${table.join('\n')}`).toBe(true);
      expect(result.code).toBe(summary.runs.some((r) => r.verdict.startsWith('inconclusive')) ? 3 : 0);
      unjudgedGuarded = summary.runs.filter((r) => r.mode === 'guarded' && r.verdict.startsWith('inconclusive')).length;
      const unjudged = [...new Set(summary.runs.filter((r) => r.verdict.startsWith('inconclusive')).map((r) => r.scenario))];
      const judged = new Map<string, CliRun[]>();
      for (const label of unjudged) judged.set(label, await judgedAgain(label));
      for (const run of summary.runs) {
        const [again] = (judged.get(run.scenario) ?? []).filter((r) => r.mode === run.mode);
        const final = run.verdict.startsWith('inconclusive') && again !== undefined ? again : run;
        // Clean, and not toothless: every protection its scenario exercises was seen at work.
        if (final.mode === 'guarded') expect(final.verdict, `${table.join('\n')}${again ? `\nrun again: ${again.verdict}` : ''}`).toBe('no anomaly');
        else expect(final.anomalies, `${final.scenario}: the control must show damage\n${table.join('\n')}`).toBeGreaterThan(0);
      }
    },
    25 * 60_000,
  );

  it('writes a report a person can read: a timeline per replica and the table, rendered in Chromium', async () => {
    expect(existsSync(reportPath)).toBe(true);
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      await page.goto(`file://${reportPath}`);
      expect(await page.title()).toMatch(/fenced split-brain simulation/);
      // One section per run, each with a timeline that has a lane per replica and leadership epochs.
      expect(await page.locator('section.run').count()).toBe(DEFAULT_RUNS.length * 2);
      const pause = page.locator('section.run[data-scenario="pause"][data-mode="guarded"]');
      expect(await pause.locator('svg.timeline text.lane-label').allTextContents()).toEqual(['r1', 'r2', 'r3']);
      expect(await pause.locator('svg.timeline rect.epoch').count()).toBeGreaterThan(1);
      expect(await pause.locator('svg.timeline rect.fault').count()).toBeGreaterThan(0);
      // Where the first pause was aimed: the leader stopped at its failpoint, marked on its lane.
      expect(await pause.locator('svg.timeline path.mark.failpoint title').first().textContent()).toMatch(/^r\d stopped at handler\.prechecked-before-write$/);
      // The table: a row per run, guarded rows clean, control rows showing damage.
      const rows = await page.locator('table.results tbody tr').allTextContents();
      expect(rows).toHaveLength(DEFAULT_RUNS.length * 2);
      expect(await page.locator('table.results tbody tr.bad').count()).toBe(0);
      // The report shows the first verdicts: a guarded run starved too long to judge reads
      // inconclusive there (the test above judged it again alone), every other one ok.
      expect(await page.locator('section.run[data-mode="guarded"] .verdict.inconclusive').count()).toBe(unjudgedGuarded);
      expect(await page.locator('section.run[data-mode="guarded"] .verdict.ok').count()).toBe(DEFAULT_RUNS.length - unjudgedGuarded);
      // Damage in a control is drawn: stale or duplicate writes that took effect are red marks.
      expect(await page.locator('section.run[data-mode="control"] circle.harm').count()).toBeGreaterThan(0);
      // Every kind of mark drawn anywhere has its entry in the legend, drawn the same way.
      const drawn = new Set(await page.locator('svg.timeline [data-legend]').evaluateAll((els) => els.map((e) => e.getAttribute('data-legend')!)));
      const legend = new Set(await page.locator('.legend [data-legend-entry]').evaluateAll((els) => els.map((e) => e.getAttribute('data-legend-entry')!)));
      expect(drawn.size).toBeGreaterThan(4);
      expect([...drawn].filter((key) => !legend.has(key))).toEqual([]);
      // …drawn the same way: the same shape, the same fill and stroke (epochs take their token's colour).
      // Runs in the page (the type check here has no DOM library, hence the structural types).
      const look = (e: { tagName: string }) => {
        const style = (globalThis as unknown as { getComputedStyle(e: unknown): { fill: string; stroke: string } }).getComputedStyle(e);
        return `${e.tagName} fill=${style.fill} stroke=${style.stroke}`;
      };
      for (const key of [...drawn].filter((k) => k !== 'epoch')) {
        const chart = await page.locator(`svg.timeline [data-legend="${key}"]`).first().evaluate(look);
        const entry = await page.locator(`.legend [data-legend-entry="${key}"] svg > *`).first().evaluate(look);
        expect(entry, key).toBe(chart);
      }
      // A control's violations are listed open, so a screenshot shows them.
      const violations = page.locator('section.run[data-mode="control"] details.violations[open] li');
      expect(await violations.count()).toBeGreaterThan(0);
      expect(await violations.first().isVisible()).toBe(true);
      // The columns are defined under the table.
      expect(await page.locator('dl.columns dt').allTextContents()).toEqual(RESULT_COLUMNS);
      // The whole table fits a 1,400 px page: nothing to scroll sideways, no column cut off.
      await page.setViewportSize({ width: 1400, height: 900 });
      const [tableWidth, room] = await page.locator('table.results').evaluate((e: { getBoundingClientRect(): { width: number }; parentElement: { clientWidth: number } | null }) => [e.getBoundingClientRect().width, e.parentElement!.clientWidth]);
      expect(tableWidth, `the table is ${tableWidth} px wide in ${room} px`).toBeLessThanOrEqual(room!);
      await page.setViewportSize({ width: 1280, height: 900 });
      const shot = join(out, 'report.png');
      await page.screenshot({ path: shot, fullPage: false });
      expect(readFileSync(shot).length).toBeGreaterThan(10_000);
    } finally {
      await browser.close();
    }
  });
});

describe('named regression seeds', () => {
  // Side by side: each run waits on real time far more than it computes, and judges the starvation
  // it measured as any run does.
  it.concurrent.for([...regressions])('$name ($scenario, seed $seed) stays clean', { timeout: 360_000 }, async ({ scenario, seed }, { expect }) => {
    const once = () =>
      runScenario(ledgerApp, scenarios[scenario], 'guarded', {
        databaseUrl: testDatabaseUrl(),
        replicas: 3,
        durationMs: 8000,
        seed,
        ttlMs: 1000,
        renewIntervalMs: 250,
        everyMs: 250,
      });
    // The same seed again while the machine starves the run too long to judge its timing: it must
    // come out judged, and clean.
    let result = await once();
    for (let attempt = 1; attempt < 3 && result.check.inconclusive !== null && result.check.anomalies === 0; attempt++) result = await once();
    expect(result.check.violations).toEqual([]);
    expect(result.check.anomalies).toBe(0);
    expect(result.check.inconclusive).toBeNull();
  });
});
