import { isFencedError, parseToken, type Token } from '@fenced/shared';
import { createMemoryFenceDatabase, createMemoryGuard } from '@fenced/consumer-guard/memory';
import { waitFor } from '#test-support';
import { describe, expect, it, vi } from 'vitest';
import { advanceWithTakeover, type BlockingWrite, type TakeoverStore } from './advance-with-takeover.js';

// The takeover loop against its own promise, below the fence stores that use it (their conformance
// suite tests the whole advance): it waits a grace period, then asks the store to end what blocks it,
// every grace period until the advance settles; it reports each blocker once; finding blockers is best
// effort; and once the advance settles it does nothing more, and leaves nothing running.

/**
 * A store at the seam whose advance the test settles by hand, and whose blockers it scripts: the
 * in-memory store (below) answers at once and never fails, so a failing waiter or a failing search
 * for blockers can be shown only here.
 */
function scriptedStore(blockers: (call: number) => Promise<readonly BlockingWrite[]>, waiter: Promise<string> = Promise.resolve('advance-session')) {
  const timeouts: number[] = [];
  const searches: Array<{ readonly waiter: string; readonly token: Token }> = [];
  let commit!: () => void;
  let fail!: (err: Error) => void;
  const done = new Promise<void>((resolve, reject) => {
    commit = resolve;
    fail = reject;
  });
  const store: TakeoverStore<string> = {
    startAdvance(_resource, _token, timeoutMs) {
      timeouts.push(timeoutMs);
      return { waiter, done };
    },
    endBlockers(session, token) {
      searches.push({ waiter: session, token });
      return blockers(searches.length);
    },
  };
  return { store, timeouts, searches, commit, fail };
}

/** The timers this process has running: a settled advance must not add one. */
const five = parseToken(5n);

const runningTimers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;

describe('advanceWithTakeover', () => {
  it('without a takeover policy is the store advance alone, its waits not bounded by the takeover', async () => {
    const { store, timeouts, searches, commit } = scriptedStore(async () => []);
    const advance = advanceWithTakeover(store, 'r', five, false, () => {});
    commit();
    await advance;
    expect(timeouts).toEqual([0]);
    expect(searches).toEqual([]);
  });

  it('an advance that commits within the grace period ends nothing and leaves no timer running', async () => {
    const { store, timeouts, searches, commit } = scriptedStore(async () => []);
    const before = runningTimers();
    const advance = advanceWithTakeover(store, 'r', five, { graceMs: 60_000, timeoutMs: 90_000 }, () => {});
    commit();
    await advance;
    expect(timeouts).toEqual([90_000]);
    expect(searches).toEqual([]);
    // A grace period of a minute left pending would hold a process that is done open for a minute.
    expect(runningTimers()).toBe(before);
  });

  it('asks the store to end what blocks it every grace period, with its own token, and reports each blocker once', async () => {
    const frozen: BlockingWrite = { session: '41', token: parseToken(3n), ended: false };
    const { store, searches, commit } = scriptedStore(async (call) => (call < 3 ? [frozen] : [{ ...frozen, ended: true }]));
    const reported: BlockingWrite[] = [];
    const advance = advanceWithTakeover(store, 'r', five, { graceMs: 5, timeoutMs: 5000 }, (blocker) => reported.push(blocker));
    await waitFor(() => searches.length >= 4, 5000);
    commit();
    await advance;
    expect(searches.slice(0, 4)).toEqual(Array.from({ length: 4 }, () => ({ waiter: 'advance-session', token: five })));
    // One blocker this role may not end, found three times, then ended: two reports.
    expect(reported).toEqual([frozen, { ...frozen, ended: true }]);
    const settledAfter = searches.length;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(searches.length, 'no search for blockers after the advance settled').toBe(settledAfter);
  });

  it('starts no search once the advance has settled, even when the session that waits is known only then', async () => {
    let tellSession!: (session: string) => void;
    const waiter = new Promise<string>((resolve) => (tellSession = resolve));
    const { store, searches, commit } = scriptedStore(async () => [], waiter);
    let graceOver = false;
    const advance = advanceWithTakeover(store, 'r', five, { graceMs: 5, timeoutMs: 5000 }, () => {});
    // Past the first grace period the loop waits for the session; it and the commit arrive together.
    await new Promise((resolve) => setTimeout(resolve, 50)).then(() => (graceOver = true));
    tellSession('advance-session');
    commit();
    await advance;
    expect(graceOver).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(searches).toEqual([]);
  });

  it('a failed search for blockers is not the advance failing: it searches again, and the advance decides', async () => {
    const { store, searches, commit } = scriptedStore(async (call) => {
      if (call === 1) throw new Error('the session that searches was killed');
      return [{ session: '7', token: parseToken(2n), ended: true }];
    });
    const reported: BlockingWrite[] = [];
    const advance = advanceWithTakeover(store, 'r', five, { graceMs: 5, timeoutMs: 5000 }, (blocker) => reported.push(blocker));
    await waitFor(() => reported.length === 1, 5000);
    commit();
    await expect(advance).resolves.toBeUndefined();
    expect(searches.length).toBeGreaterThanOrEqual(2);
  });

  it("the advance's failure is the caller's, whether or not it waited on blockers, and a failed waiter is no failure of its own", async () => {
    const quick = scriptedStore(async () => []);
    const quickAdvance = advanceWithTakeover(quick.store, 'r', five, { graceMs: 60_000, timeoutMs: 90_000 }, () => {});
    quick.fail(new Error('lock wait timeout'));
    await expect(quickAdvance).rejects.toThrow('lock wait timeout');

    // The session that would wait never started: nothing to search, and the advance fails on its own.
    const noWaiter = scriptedStore(async () => [], Promise.reject(new Error('connection refused')));
    const failing = advanceWithTakeover(noWaiter.store, 'r', five, { graceMs: 5, timeoutMs: 5000 }, () => {});
    await new Promise((resolve) => setTimeout(resolve, 30));
    noWaiter.fail(new Error('connection refused'));
    await expect(failing).rejects.toThrow('connection refused');
    expect(noWaiter.searches).toEqual([]);

    const plain = scriptedStore(async () => []);
    const plainAdvance = advanceWithTakeover(plain.store, 'r', five, false, () => {});
    plain.fail(new Error('lock wait timeout'));
    await expect(plainAdvance).rejects.toThrow('lock wait timeout');
  });

  it('on the in-memory store, ends a frozen writer of a lower token only after the grace period', async () => {
    const database = createMemoryFenceDatabase();
    const guard = createMemoryGuard({ database, resource: 'invoices', takeover: { graceMs: 300, timeoutMs: 5000 } });
    await guard.migrate();
    await guard.advance(3n);
    let entered!: () => void;
    const inFn = new Promise<void>((resolve) => (entered = resolve));
    const frozen = guard.guardedWrite(3n, async () => {
      entered();
      await new Promise(() => {});
    });
    frozen.catch(() => {});
    await inFn;
    const started = performance.now();
    await guard.advance(4n);
    expect(performance.now() - started).toBeGreaterThanOrEqual(300 - 1);
    const outcome = await frozen.catch((err: unknown) => err);
    expect(isFencedError(outcome, 'GUARD_UNAVAILABLE') || isFencedError(outcome, 'STALE_TOKEN')).toBe(true);
    expect(await guard.highest()).toBe(4n);
  });
  it('runs its grace periods on the global timers, so that fake timers (a test\'s, a simulator\'s virtual time) drive it', async () => {
    const { store, searches, commit } = scriptedStore(async () => []);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const advance = advanceWithTakeover(store, 'r', five, { graceMs: 60_000, timeoutMs: 90_000 }, () => {});
      await vi.advanceTimersByTimeAsync(60_000);
      expect(searches).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(60_000);
      expect(searches).toHaveLength(2);
      commit();
      await advance;
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
