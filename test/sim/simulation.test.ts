import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runScenario, scenarios, SCENARIO_NAMES } from '@fenced/chaos';
import { testDatabaseUrl } from '#test-support';
import { describe, expect, it } from 'vitest';
import { ledgerApp } from '../../examples/ledger-sim/app.js';
import { regressions } from './regressions.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const out = mkdtempSync(join(tmpdir(), 'fenced-sim-'));
const reportPath = join(out, 'report.html');
const SEED = 7;

interface CliRun {
  scenario: string;
  mode: 'guarded' | 'control';
  anomalies: number;
  staleRefused: number;
  violations: string[];
}

/** Runs `pnpm sim` as a user would (the same entry point), with a short duration. */
function sim(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', 'examples/ledger-sim/sim.ts', ...args], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: testDatabaseUrl() },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('pnpm sim', () => {
  it('refuses bad input with one line naming the fix and exit code 2', async () => {
    const unknown = await sim(['--scenario', 'meteor']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.trim().split('\n')).toHaveLength(1);
    expect(unknown.stderr).toMatch(/unknown scenario "meteor": choose from pause, crash/);
    const duration = await sim(['--duration', 'soon']);
    expect(duration.code).toBe(2);
    expect(duration.stderr).toMatch(/bad duration "soon"/);
  });

  it(
    'every scenario: zero anomalies guarded, damage in the unguarded control, same seed',
    async () => {
      const result = await sim(['--scenario', 'all', '--duration', '6s', '--seed', String(SEED), '--replicas', '3', '--report', reportPath, '--json']);
      const summary = JSON.parse(result.stdout) as { ok: boolean; runs: CliRun[] };
      const table = summary.runs.map((r) => `${r.scenario} ${r.mode}: ${r.anomalies} anomalies ${r.mode === 'guarded' ? r.violations.join('; ') : ''}`);
      expect(summary.runs.map((r) => `${r.scenario} ${r.mode}`)).toEqual(SCENARIO_NAMES.flatMap((s) => [`${s} guarded`, `${s} control`]));
      for (const run of summary.runs) {
        if (run.mode === 'guarded') expect(run.anomalies, table.join('\n')).toBe(0);
        else expect(run.anomalies, `${run.scenario}: the control must show damage\n${table.join('\n')}`).toBeGreaterThan(0);
      }
      expect(summary.ok).toBe(true);
      expect(result.code).toBe(0);
    },
    8 * 60_000,
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
      expect(await page.locator('section.run').count()).toBe(SCENARIO_NAMES.length * 2);
      const pause = page.locator('section.run[data-scenario="pause"][data-mode="guarded"]');
      expect(await pause.locator('svg.timeline text.lane-label').allTextContents()).toEqual(['r1', 'r2', 'r3']);
      expect(await pause.locator('svg.timeline rect.epoch').count()).toBeGreaterThan(1);
      expect(await pause.locator('svg.timeline rect.fault').count()).toBeGreaterThan(0);
      // The table: a row per run, guarded rows clean, control rows showing damage.
      const rows = await page.locator('table.results tbody tr').allTextContents();
      expect(rows).toHaveLength(SCENARIO_NAMES.length * 2);
      expect(await page.locator('table.results tbody tr.bad').count()).toBe(0);
      expect(await page.locator('section.run[data-mode="guarded"] .verdict.ok').count()).toBe(SCENARIO_NAMES.length);
      // Damage in a control is drawn: stale or duplicate writes that took effect are red marks.
      expect(await page.locator('section.run[data-mode="control"] circle.harm').count()).toBeGreaterThan(0);
      const shot = join(out, 'report.png');
      await page.screenshot({ path: shot, fullPage: false });
      expect(readFileSync(shot).length).toBeGreaterThan(10_000);
    } finally {
      await browser.close();
    }
  });
});

describe('named regression seeds', () => {
  it.each(regressions)('$name ($scenario, seed $seed) stays clean', async ({ scenario, seed }) => {
    const result = await runScenario(ledgerApp, scenarios[scenario], 'guarded', {
      databaseUrl: testDatabaseUrl(),
      replicas: 3,
      durationMs: 8000,
      seed,
      ttlMs: 1000,
      renewMs: 250,
      everyMs: 250,
    });
    expect(result.check.violations).toEqual([]);
    expect(result.check.anomalies).toBe(0);
  }, 120_000);
});
