import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkRun } from '../checker/check-run.js';
import { History } from '../history.js';
import { KEPT_RUNS, keepRun, keptRunsRoot } from './kept-runs.js';

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A run whose history shows a write refused and one applied, with a violation to name. */
function failedRun(seed: number) {
  const history = new History();
  history.record({ at: 1_000, kind: 'belief', node: 'r1', leader: true, token: '7' });
  history.record({ at: 1_010, kind: 'write', node: 'r1', fireId: 'tick@1000', token: '7', outcome: 'committed' });
  const check = { ...checkRun({ history: history.events, effects: [], expectedFireIds: [], window: { start: 0, end: 2_000 } }), violations: ['a stale write committed: token 6 after 7'] };
  return {
    scenario: 'pause@postgres',
    mode: 'guarded' as const,
    seed,
    check,
    effects: [],
    history,
    logs: { r1: { stdout: [{ at: Date.UTC(2026, 11, 4), record: { kind: 'ready' } }], stderr: 'boom\n' }, r2: { stdout: [], stderr: '' } },
    serverLogs: { 'redis-6390': '1:M 07 Dec 2026 01:35:25.603 # Connection with replica 127.0.0.1:6391 lost.\n', 'sentinel-26379': '' },
  };
}

describe('failed runs, kept', () => {
  it("keep the history, the check, every replica log, the report and the run's Redis servers' logs in one folder, and name it", () => {
    const root = mkdtempSync(join(tmpdir(), 'fenced-kept-'));
    roots.push(root);
    const dir = keepRun(root, { run: failedRun(7), verdict: '1 anomalies', command: 'pnpm sim --scenario pause --seed 7', reportHtml: '<html>report</html>' });
    expect(dir.startsWith(root)).toBe(true);
    expect(dir).toMatch(/pause-postgres-guarded-seed7$/);
    expect(readdirSync(dir).sort()).toEqual(['README.txt', 'check.json', 'effects.json', 'history.jsonl', 'r1.stderr.log', 'r1.stdout.log', 'r2.stderr.log', 'r2.stdout.log', 'report.html', 'servers']);
    expect(readdirSync(join(dir, 'servers')).sort()).toEqual(['redis-6390.log', 'sentinel-26379.log']);
    expect(readFileSync(join(dir, 'servers', 'redis-6390.log'), 'utf8')).toContain('Connection with replica 127.0.0.1:6391 lost.');
    const readme = readFileSync(join(dir, 'README.txt'), 'utf8');
    expect(readme).toContain('command: pnpm sim --scenario pause --seed 7');
    expect(readme).toContain('violation: a stale write committed: token 6 after 7');
    expect(readFileSync(join(dir, 'history.jsonl'), 'utf8').trim().split('\n').map((line) => JSON.parse(line).kind)).toEqual(['belief', 'write']);
    expect(JSON.parse(readFileSync(join(dir, 'check.json'), 'utf8')).violations).toEqual(['a stale write committed: token 6 after 7']);
    expect(readFileSync(join(dir, 'r1.stderr.log'), 'utf8')).toBe('boom\n');
    expect(readFileSync(join(dir, 'r1.stdout.log'), 'utf8')).toContain('"kind":"ready"');
    expect(readFileSync(join(dir, 'report.html'), 'utf8')).toBe('<html>report</html>');
  });

  it(`keep the newest ${KEPT_RUNS} and delete older ones`, () => {
    const root = mkdtempSync(join(tmpdir(), 'fenced-kept-'));
    roots.push(root);
    const dirs = Array.from({ length: KEPT_RUNS + 3 }, (_, i) =>
      keepRun(root, { run: failedRun(i), verdict: 'x', command: 'pnpm sim', reportHtml: '' }, new Date(Date.UTC(2026, 11, 4, 12, 0, i))),
    );
    expect(readdirSync(root)).toHaveLength(KEPT_RUNS);
    for (const dir of dirs.slice(0, 3)) expect(existsSync(dir)).toBe(false);
    for (const dir of dirs.slice(3)) expect(existsSync(dir)).toBe(true);
  });

  it('go where FENCED_SIM_KEEP_DIR says, else to the temporary folder', () => {
    expect(keptRunsRoot({ FENCED_SIM_KEEP_DIR: '/var/tmp/kept' })).toBe('/var/tmp/kept');
    expect(keptRunsRoot({})).toBe(join(tmpdir(), 'fenced-sim-failures'));
  });
});
