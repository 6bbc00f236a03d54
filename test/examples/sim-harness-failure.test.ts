/**
 * A run whose toolkit fails outside the fault rounds (the app's schema could not be made, a step after
 * the replicas started threw) is a row of the table whose verdict names the error, with what it had
 * started stopped: never a throw that ends the whole simulation with no table and no report, and never
 * a server or replica left behind for the next run.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { runScenario, scenarios, verdictOf, type SimApp } from '@fenced/chaos';
import { descendants, pathWithoutRedis, testDatabaseUrl, waitFor } from '#test-support';
import { describe, expect, it } from 'vitest';
import { ledgerApp } from '../../examples/ledger-sim/app.js';

/** The commands of the processes this one started that still run. */
const liveChildren = () => descendants(process.pid).map((p) => p.command);

/**
 * Runs `body`; then kills what it left running among the processes this one started (after a failed
 * check: the server a broken teardown left behind must not outlive the test).
 */
async function leavingNothing(body: () => Promise<void>): Promise<void> {
  const before = new Set(descendants(process.pid).map((p) => p.pid));
  try {
    await body();
  } finally {
    for (const { pid } of descendants(process.pid)) {
      try {
        if (!before.has(pid)) process.kill(pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
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
        // So are its Redis server's, read as the teardown stopped it.
        expect(Object.keys(result.serverLogs)).toEqual([expect.stringMatching(/^redis-\d+$/)]);
        expect(Object.values(result.serverLogs)[0]).toMatch(/Redis version=.*just started/);
        // Its Redis (a server of its own) and its replicas: gone.
        await waitFor(() => liveChildren().length <= before.length, 10_000, 20).catch(() => undefined);
        expect(liveChildren()).toEqual(before);
      }
    });
  });

  it('its Redis cannot start after the etcd cluster did: the cluster is stopped, and the row names why', async () => {
    // A PATH with every tool of this one but Redis's: redis-server is not found (the app says it needs it).
    const bin = pathWithoutRedis();
    const path = process.env['PATH'];
    try {
      process.env['PATH'] = bin;
      await leavingNothing(async () => {
        const before = liveChildren();
        const result = await runScenario({ ...ledgerApp, usesRedis: () => true }, scenarios.pause, 'guarded', { ...options, leaseStore: 'etcd' });
        expect(verdictOf({ mode: 'guarded', check: result.check, events: result.history.events }).text).toMatch(/^harness failed: while starting: .*redis-server/);
        await waitFor(() => liveChildren().length <= before.length, 10_000, 20).catch(() => undefined);
        expect(liveChildren()).toEqual(before);
      });
    } finally {
      process.env['PATH'] = path;
      rmSync(join(bin, '..'), { recursive: true, force: true });
    }
  });
});
