import { createGuard } from '@fenced/consumer-guard';
import { createMemoryFenceDatabase, createMemoryGuard, memoryFences, type MemoryTransaction } from '@fenced/consumer-guard/memory';
import { GuardUnavailableError, parseToken, type FencedEvent } from '@fenced/shared';
import { waitFor } from '#test-support';
import { describe, expect, it, vi } from 'vitest';
import { describeFenceStoreConformance } from './conformance.js';

// One database is the store; each guard on it is one process's connection to it.
const database = createMemoryFenceDatabase();
type Effect = { readonly resource: string; readonly token: bigint };

describeFenceStoreConformance({
  name: 'memory',
  async setup() {},
  async teardown() {},
  guard: (resource, settings = {}) =>
    createMemoryGuard({ database, resource, ...(settings.takeover === undefined ? {} : { takeover: settings.takeover }), ...(settings.logger === undefined ? {} : { logger: settings.logger }) }),
  async insertEffect(trx, resource, token) {
    (trx as MemoryTransaction).insert('effects', { resource, token });
  },
  async countEffectsIn(trx, resource) {
    return (trx as MemoryTransaction).rows('effects').filter((row) => (row as Effect).resource === resource).length;
  },
  async effects(resource) {
    return database
      .rows('effects')
      .filter((row) => (row as Effect).resource === resource)
      .map((row) => (row as Effect).token);
  },
  async sessionOf(trx) {
    return (trx as MemoryTransaction).session;
  },
  async kill(session) {
    database.kill(session);
  },
  waitForLockWait: () => waitFor(() => database.lockWaits > 0, 20_000),
  async recordNewerMigration() {
    database.migrations.add(999999);
    return { undo: async () => void database.migrations.delete(999999) };
  },
  writeIn: { without: 'the in-memory store has no transaction a caller could hold (its writes run in transactions of their own)' },
});

describe('the in-memory fence database', () => {
  /** 'granted' if `lock` has been granted by the time every settled promise has run, else 'waiting'. */
  const state = (lock: Promise<unknown>) => Promise.race([lock.then(() => 'granted'), new Promise((resolve) => setImmediate(() => resolve('waiting')))]);

  it('frees the lock of a session it ends at once, while its holder is frozen, and the holder waking later frees nothing of the next one', async () => {
    const frozen = database.begin();
    const lateRelease = await database.lock('kill-frees-lock', { session: frozen.session, token: parseToken(1n) }, 0);
    const next = database.lock('kill-frees-lock', { session: 'next', token: parseToken(2n) }, 0);
    expect(await state(next)).toBe('waiting');
    expect(database.kill(frozen.session)).toBe(true);
    expect(await state(next)).toBe('granted');
    const third = database.lock('kill-frees-lock', { session: 'third', token: parseToken(3n) }, 0);
    // The frozen holder wakes and releases: the lock is the next one's, not its to give.
    lateRelease();
    expect(await state(third)).toBe('waiting');
    (await next)();
    expect(await state(third)).toBe('granted');
    (await third)();
  });

  it('ends a session that waits for a lock (its wait fails, typed, and the queue goes on), and one that holds a lock outside a transaction (an advance)', async () => {
    const advance = database.newSession();
    const releaseAdvance = await database.lock('kill-ends-waits', { session: advance, token: null }, 0);
    const waiter = database.begin();
    const waiting = database.lock('kill-ends-waits', { session: waiter.session, token: parseToken(1n) }, 0);
    const behind = database.lock('kill-ends-waits', { session: 'behind', token: parseToken(2n) }, 0);
    expect(database.kill(waiter.session)).toBe(true);
    await expect(waiting).rejects.toMatchObject({ code: 'GUARD_UNAVAILABLE' });
    expect(database.lockWaits).toBe(1);
    expect(database.kill(advance)).toBe(true);
    expect(await state(behind)).toBe('granted');
    releaseAdvance();
    (await behind)();
    // Ended once: a session ended, or done, is no longer open.
    expect(database.kill(advance)).toBe(false);
    expect(database.kill(waiter.session)).toBe(false);
  });

  it('fails a wait for a lock past its bound, typed, and takes it out of the queue: the lock passes it by', async () => {
    const releaseHolder = await database.lock('lock-bound', { session: 'holder', token: parseToken(1n) }, 0);
    const bounded = database.lock('lock-bound', { session: 'bounded', token: null }, 20);
    // An advance's session (no transaction) ended while it waits: its wait fails too.
    const advance = database.newSession();
    const ended = database.lock('lock-bound', { session: advance, token: null }, 0);
    const behind = database.lock('lock-bound', { session: 'behind', token: parseToken(2n) }, 0);
    expect(database.kill(advance)).toBe(true);
    await expect(ended).rejects.toMatchObject({ code: 'GUARD_UNAVAILABLE' });
    await expect(bounded).rejects.toThrow(new GuardUnavailableError("memory fence store: lock-bound: waited 20 ms for the fence's lock", { cause: undefined }));
    expect(database.blockerOf('behind')).toMatchObject({ session: 'holder' });
    expect(database.blockerOf('bounded')).toBeNull();
    releaseHolder();
    expect(await state(behind)).toBe('granted');
    expect(database.blockerOf('behind')).toBeNull();
    (await behind)();
  });

  it('a bounded wait granted in time is done with its bound: when the bound passes, the queue behind it is untouched', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const releaseHolder = await database.lock('bound-granted', { session: 'holder', token: parseToken(1n) }, 0);
      const bounded = database.lock('bound-granted', { session: 'bounded', token: null }, 50);
      const behind = database.lock('bound-granted', { session: 'behind', token: parseToken(2n) }, 0);
      releaseHolder();
      const releaseBounded = await bounded;
      await vi.advanceTimersByTimeAsync(100);
      releaseBounded();
      await expect(behind).resolves.toBeTypeOf('function');
      (await behind)();
    } finally {
      vi.useRealTimers();
    }
  });

  it('a transaction reads what committed and its own pending rows; once ended, it reads and writes nothing, and says so', async () => {
    const fresh = createMemoryFenceDatabase();
    expect(fresh.audit).toEqual([]);
    expect(fresh.newSession()).toBe('memory-1');
    const committed = fresh.begin();
    expect(committed.session).toBe('memory-2');
    committed.insert('t', { n: 1 });
    fresh.applyRows(committed);
    fresh.close(committed);
    // Done: no longer a session to end.
    expect(fresh.kill(committed.session)).toBe(false);
    const tx = fresh.begin();
    tx.insert('t', { n: 2 });
    expect(tx.rows('t')).toEqual([{ n: 1 }, { n: 2 }]);
    expect(tx.rows('none')).toEqual([]);
    expect(tx.isEnded()).toBe(false);
    // Ended before it took any lock: still an open session.
    expect(fresh.kill(tx.session)).toBe(true);
    expect(tx.isEnded()).toBe(true);
    const ended = `memory fence store: session ${tx.session} was ended during the write; nothing of it was applied`;
    await expect(tx.ended).rejects.toThrow(new GuardUnavailableError(ended, { cause: undefined }));
    expect(() => tx.insert('t', { n: 3 })).toThrow(ended);
    expect(() => tx.rows('t')).toThrow(ended);
    expect(fresh.rows('t')).toEqual([{ n: 1 }]);
  });
});

describe('the in-memory fence store', () => {
  it('refuses every read and write until migrated (SCHEMA_MISSING, naming the store), and a refused write changes nothing', async () => {
    const fresh = createMemoryFenceDatabase();
    const guard = createMemoryGuard({ database: fresh, resource: 'unmigrated' });
    const missing = { code: 'SCHEMA_MISSING', message: expect.stringContaining('the in-memory fence store') };
    let ran = false;
    await expect(guard.guardedWrite(1n, async () => void (ran = true))).rejects.toMatchObject(missing);
    await expect(guard.highest()).rejects.toMatchObject(missing);
    await expect(guard.advance(2n)).rejects.toMatchObject(missing);
    await expect(guard.lowerFence({ token: 1n, actor: 'ops@example', reason: 'before any migration' })).rejects.toMatchObject(missing);
    await expect(guard.lastAppliedFires(new Date(0))).rejects.toMatchObject(missing);
    await expect(guard.appliedFireIds(['invoices@1'])).rejects.toMatchObject(missing);
    expect(ran).toBe(false);
    expect([...fresh.fences]).toEqual([]);
    await guard.migrate();
    await guard.guardedWrite(1n, async () => void (ran = true));
    expect(ran).toBe(true);
    expect(await guard.highest()).toBe(1n);
  });

  it('a session ended after fn returned, before the commit, fails the write closed: nothing of it applies, the fire stays unclaimed', async () => {
    const resource = 'ended-before-commit';
    const guard = createMemoryGuard({ database, resource });
    const fireId = 'invoices@20261202T120000.000Z';
    const thrown = await guard
      .guardedWrite(
        3n,
        async (trx) => {
          const tx = trx as MemoryTransaction;
          tx.insert('effects', { resource, token: 3n });
          // Ended on the next turn of the microtask queue: after fn is done, before the store commits.
          queueMicrotask(() => database.kill(tx.session));
        },
        { fireId },
      )
      .catch((err: unknown) => err);
    expect(thrown).toMatchObject({ code: 'GUARD_UNAVAILABLE' });
    expect(database.rows('effects').filter((row) => (row as Effect).resource === resource)).toEqual([]);
    expect(await guard.highest()).toBe(null);
    expect(await guard.appliedFireIds([fireId])).toEqual(new Set());
  });

  it("an election's takeover never ends a session that announced no token (another advance, a lowering): the advance waits, then gives up typed", async () => {
    const resource = 'takeover-spares-tokenless';
    const events: FencedEvent[] = [];
    const guard = createMemoryGuard({ database, resource, takeover: { graceMs: 20, timeoutMs: 400 }, logger: (event) => events.push(event) });
    const holder = database.newSession();
    const release = await database.lock(resource, { session: holder, token: null }, 0);
    try {
      await expect(guard.advance(5n)).rejects.toMatchObject({ code: 'GUARD_UNAVAILABLE' });
    } finally {
      release();
    }
    expect(await guard.highest()).toBe(null);
    expect(events.filter((event) => event.type === 'guard.takeover')).toEqual([]);
    await guard.advance(5n);
    expect(await guard.highest()).toBe(5n);
  });

  it('orders applied fires as the SQL stores do: by the time applied, of equal times the largest fire id, a clock that stepped back believed; prunes what is strictly older than the age', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const fresh = createMemoryFenceDatabase();
      const guard = createMemoryGuard({ database: fresh, resource: 'applied-order' });
      await guard.migrate();
      const fire = (hour: number) => `invoices@20261202T${String(hour).padStart(2, '0')}0000.000Z`;
      // Three at one millisecond: the largest id is neither the first recorded nor the last.
      vi.setSystemTime(2_000);
      for (const hour of [10, 12, 11]) await guard.guardedWrite(1n, async () => undefined, { fireId: fire(hour) });
      expect(await guard.lastAppliedFire()).toMatchObject({ fireId: fire(12), appliedAt: new Date(2_000) });
      // The clock steps back: the fire applied after it carries the earlier time, and is not the latest.
      vi.setSystemTime(1_000);
      await guard.guardedWrite(1n, async () => undefined, { fireId: fire(13) });
      expect(await guard.lastAppliedFire()).toMatchObject({ fireId: fire(12), appliedAt: new Date(2_000) });
      const [report] = (await guard.inspect()).fences;
      expect(report).toMatchObject({ appliedFires: 4, oldestAppliedAt: new Date(1_000) });
      // Exactly 500 ms old at 1,500: kept; a millisecond later it is older, and goes.
      vi.setSystemTime(1_500);
      expect(await guard.pruneAppliedFires(500)).toBe(0);
      vi.setSystemTime(1_501);
      expect(await guard.pruneAppliedFires(500)).toBe(1);
      expect(await guard.appliedFireIds([fire(10), fire(11), fire(12), fire(13)])).toEqual(new Set([fire(10), fire(11), fire(12)]));
    } finally {
      vi.useRealTimers();
    }
  });

  it("inspects as a database with no timeouts whose takeover may end any session, and names itself in a factory's errors", async () => {
    const guard = createMemoryGuard({ database, resource: 'inspected' });
    const inspection = await guard.inspect();
    expect(inspection.server).toEqual({ defaultIsolation: 'serializable', readOnly: false, lockTimeoutMs: 0, statementTimeoutMs: 0, idleInTransactionTimeoutMs: 0, mayEndOtherRoles: true, version: 'in memory' });
    expect(inspection.appliedFires.bytes).toBe(0);
    const factoryGuard = createGuard({ store: memoryFences({ database }), resource: 'inspected' });
    const executor = { executeSql: async () => ({ rows: [] }) };
    await expect(factoryGuard.guardedWriteIn(executor, 1n, async () => undefined)).rejects.toThrow('the memory fence store writes in transactions of its own only');
  });
});
