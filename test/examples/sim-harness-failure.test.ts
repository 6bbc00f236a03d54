/**
 * A run whose toolkit fails outside the fault rounds (the app's schema could not be made, a step after
 * the replicas started threw) is a row of the table whose verdict names the error, with what it had
 * started stopped: never a throw that ends the whole simulation with no table and no report, and never
 * a server or replica left behind for the next run.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runScenario, scenarios, verdictOf, type SimApp } from '@fenced/chaos';
import { testDatabaseUrl, waitFor } from '#test-support';
import { describe, expect, it } from 'vitest';
import { ledgerApp } from '../../examples/ledger-sim/app.js';

/** This process's children still running (a zombie is dead): their pids and commands. */
function liveChildProcesses(): Array<{ pid: number; command: string }> {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .flatMap((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
        const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        if (Number(ppid) !== process.pid || state === 'Z') return [];
        return [{ pid: Number(pid), command: readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ').trim() }];
      } catch {
        return []; // gone while we looked
      }
    });
}

const liveChildren = () => liveChildProcesses().map((p) => p.command);

/**
 * Runs `body`; then kills what it left running among this process's children (after a failed check:
 * the server a broken teardown left behind must not outlive the test).
 */
async function leavingNothing(body: () => Promise<void>): Promise<void> {
  const before = new Set(liveChildProcesses().map((p) => p.pid));
  try {
    await body();
  } finally {
    for (const { pid } of liveChildProcesses()) if (!before.has(pid)) process.kill(pid, 'SIGKILL');
  }
}

const options = { databaseUrl: testDatabaseUrl(), replicas: 3, durationMs: 6000, seed: 7, ttlMs: 1000, renewIntervalMs: 250, everyMs: 250 };

describe('a run whose harness fails outside the fault rounds', () => {
  it.each([
    ['the app cannot prepare its schema', { ...ledgerApp, prepare: () => Promise.reject(new Error('no schema for you')) }, 'harness failed: while starting: no schema for you', 0],
    [
      'a step after the replicas started throws',
      {
        ...ledgerApp,
        leaseKey: () => {
          throw new Error('no lease key for you');
        },
      },
      'harness failed: while starting: no lease key for you',
      3,
    ],
  ] as Array<[string, SimApp, string, number]>)('%s: a failed row naming it, every server and replica it started stopped', async (_case, app, verdict, replicas) => {
    await leavingNothing(async () => {
      const before = liveChildren();
      for (const mode of ['guarded', 'control'] as const) {
        const result = await runScenario(app, scenarios.pause, mode, options);
        expect(verdictOf({ mode, check: result.check, events: result.history.events })).toEqual({ ok: false, inconclusive: false, text: verdict });
        // The replicas' logs are in the result (a kept run holds them) when they had started.
        expect(result.nodes).toHaveLength(replicas);
        // Its Redis (a server of its own) and its replicas: gone.
        await waitFor(() => liveChildren().length <= before.length, 10_000, 20).catch(() => undefined);
        expect(liveChildren()).toEqual(before);
      }
    });
  });

  it('its Redis cannot start after the etcd cluster did: the cluster is stopped, and the row names why', async () => {
    // A PATH with every tool of this one but Redis's: redis-server is not found (the app says it needs it).
    const dir = mkdtempSync(join(tmpdir(), 'fenced-no-redis-'));
    const path = process.env['PATH'];
    try {
      for (const from of (path ?? '').split(':')) {
        if (from === '' || !existsSync(from)) continue;
        for (const tool of readdirSync(from)) if (!tool.startsWith('redis-') && !existsSync(join(dir, tool))) symlinkSync(join(from, tool), join(dir, tool));
      }
      process.env['PATH'] = dir;
      await leavingNothing(async () => {
        const before = liveChildren();
        const result = await runScenario({ ...ledgerApp, usesRedis: () => true }, scenarios.pause, 'guarded', { ...options, leaseStore: 'etcd' });
        expect(verdictOf({ mode: 'guarded', check: result.check, events: result.history.events }).text).toMatch(/^harness failed: while starting: .*redis-server/);
        await waitFor(() => liveChildren().length <= before.length, 10_000, 20).catch(() => undefined);
        expect(liveChildren()).toEqual(before);
      });
    } finally {
      process.env['PATH'] = path;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
