import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { descendants, readProc, testDatabaseUrl, waitFor, type Proc } from '#test-support';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Those of `procs` still alive as the same program (a dead one may linger as a zombie: that is dead). */
const stillAlive = (procs: readonly Proc[]) =>
  procs.map((p) => readProc(p.pid)).filter((p, i): p is Proc => p !== undefined && p.state !== 'Z' && p.command === procs[i]!.command);

describe('interrupting pnpm sim', () => {
  it('ends every process of its own, a frozen replica and Redis included, on SIGINT and SIGTERM', async () => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      const sim = spawn(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', 'examples/ledger-sim/sim.ts', '--scenario', 'pause', '--duration', '20s', '--seed', '3'], {
        cwd: root,
        env: { ...process.env, DATABASE_URL: testDatabaseUrl() },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      sim.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((resolve) => sim.on('exit', (code) => resolve(code)));
      let before: Proc[] = [];
      try {
        // Interrupt while the pause fault has a replica frozen (SIGSTOP), the case that used to leak.
        await waitFor(() => descendants(sim.pid!).some((p) => p.state === 'T'), 90_000, 20);
        before = descendants(sim.pid!);
        expect(before.some((p) => p.command.startsWith('redis-server')), JSON.stringify(before)).toBe(true);
        // The replicas run their bundle (examples/bundled-entry.ts: <n>-replica.mjs).
        expect(before.filter((p) => /-replica\.mjs$/.test(p.command)).length, JSON.stringify(before)).toBe(3);
        sim.kill(signal);
        expect(await exited).toBe(signal === 'SIGINT' ? 130 : 143);
        expect(stderr).toMatch(new RegExp(`interrupted \\(${signal}\\)`));
        await waitFor(() => stillAlive(before).length === 0, 10_000, 20).catch(() => undefined);
        expect(stillAlive(before)).toEqual([]);
      } finally {
        if (sim.exitCode === null) sim.kill('SIGKILL');
        for (const p of stillAlive(before)) {
          try {
            process.kill(p.pid, 'SIGCONT');
            process.kill(p.pid, 'SIGKILL');
          } catch {
            // Gone.
          }
        }
      }
    }
  }, 240_000);
});
