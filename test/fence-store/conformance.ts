// The fence-store conformance suite: what every fence store promises (packages/consumer-guard/src/
// fence-store.ts), written once and run against each store (conformance-postgres.test.ts,
// conformance-mysql.test.ts), as kysely runs one test suite over every dialect. Each test goes
// through the store's own public guard (createPostgresGuard, createMysqlGuard): no fast path, no
// handler, nothing above the seam that could absorb a store's bug.
import { createEnvelope, isFencedError, parseToken, type Envelope, type FencedEvent, type FencedLogger } from '@fenced/shared';
import type { FenceGuard, Guard, TransactionExecutor } from '@fenced/consumer-guard';
import { gate, resultWithin, waitFor } from '#test-support';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

export interface GuardSettings {
  readonly takeover?: false | { readonly graceMs: number; readonly timeoutMs: number };
  readonly isolationLevel?: 'read committed' | 'repeatable read' | 'serializable';
  readonly logger?: FencedLogger;
}

export interface FenceStoreHarness {
  readonly name: string;
  /** Creates the store's database (and an `effects` table beside the store's tables). */
  setup(): Promise<void>;
  teardown(): Promise<void>;
  /** The store's own guard on the harness's database. */
  guard(resource: string, settings?: GuardSettings): FenceGuard<unknown>;
  /** The mutation every test writes: a row of `effects` (id in commit order), with the transaction `fn` got. */
  insertEffect(trx: unknown, resource: string, token: bigint): Promise<void>;
  /** The effects of `resource` this transaction sees with a plain (non-locking) read. */
  countEffectsIn(trx: unknown, resource: string): Promise<number>;
  /** The tokens of the committed effects of `resource`, in commit order. */
  effects(resource: string): Promise<bigint[]>;
  /** The server's id of the session `trx` runs on. */
  sessionOf(trx: unknown): Promise<string>;
  /** Ends a session from outside, as an operator or a failover would. */
  kill(session: string): Promise<void>;
  /** Resolves once `sessions` (default 1) sessions of the harness's database wait on a lock. */
  waitForLockWait(sessions?: number): Promise<void>;
  /** Records a migration newer than this version knows (`undo` removes it). */
  recordNewerMigration(): Promise<{ undo(): Promise<void> }>;
  /**
   * The optional role `writeIn` (the check inside a transaction the caller holds, as a queue's):
   * how the harness opens such a transaction and writes an effect in it, or why the store does not
   * offer the role (the suite skips it, saying so, and fails when a store that claims it is wrong).
   */
  readonly writeIn:
    | {
        /**
         * A guard over the store's factory (`createGuard({ store })`, no fast path): `guardedWriteIn`
         * reaches the store's `writeIn`, and a transactional handler's `batch` its `checkBatchIn`
         * (one by one where the store has none).
         */
        guard(resource: string): Guard<unknown>;
        begin(): Promise<CallerTransaction>;
        insertEffectIn(tx: TransactionExecutor, resource: string, token: bigint): Promise<void>;
        /**
         * A plain (non-locking) read of the effects in the caller's transaction: under REPEATABLE READ
         * (MySQL's default) it fixes the snapshot every later plain read of the transaction sees.
         */
        countEffectsIn(tx: TransactionExecutor, resource: string): Promise<number>;
      }
    | { readonly without: string };
}

/** A transaction the caller opened and ends, as a queue's worker does. */
export interface CallerTransaction {
  readonly tx: TransactionExecutor;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

const name = () => `r-${randomBytes(4).toString('hex')}`;
const MAX_TOKEN = 2n ** 63n - 1n;

export function describeFenceStoreConformance(harness: FenceStoreHarness): void {
  /**
   * A guarded write of `token` by `guard`, its effect written and its fence lock held inside fn until
   * the returned `finish` (which lets it commit and waits for it) is called.
   */
  async function holdWrite(guard: FenceGuard<unknown>, resource: string, token: bigint): Promise<() => Promise<void>> {
    const inside = gate();
    const release = gate();
    const write = guard.guardedWrite(token, async (trx) => {
      await harness.insertEffect(trx, resource, token);
      inside.open();
      await release.promise;
    });
    await inside.promise;
    return async () => {
      release.open();
      await write;
    };
  }

  /** A logger for a guard's settings, and the events it heard about `resource`, in order. */
  function eventsOf(resource: string): { logger: FencedLogger; heard: () => FencedEvent[] } {
    const events: FencedEvent[] = [];
    return { logger: (event) => events.push(event), heard: () => events.filter((event) => 'resource' in event && event.resource === resource) };
  }

  describe(`fence store conformance: ${harness.name}`, () => {
    beforeAll(async () => {
      await harness.setup();
      await harness.guard('setup').migrate();
    });
    afterAll(async () => {
      await harness.teardown();
    });

    it('accepts a first token, an equal one and a higher one, and refuses a lower one with the fence, fn never run', async () => {
      const resource = name();
      const guard = harness.guard(resource);
      await guard.guardedWrite(5n, async (trx, ctx) => {
        // fn learns what it writes under: the token, the resource, and which attempt this is.
        expect(ctx).toMatchObject({ token: 5n, resource, attempt: 1 });
        await harness.insertEffect(trx, resource, 5n);
      });
      await guard.guardedWrite(5n, (trx) => harness.insertEffect(trx, resource, 5n));
      await guard.guardedWrite(7n, (trx) => harness.insertEffect(trx, resource, 7n));
      let ran = false;
      const refused = await guard
        .guardedWrite(6n, async (trx) => {
          ran = true;
          await harness.insertEffect(trx, resource, 6n);
        })
        .catch((err: unknown) => err);
      expect(isFencedError(refused, 'STALE_TOKEN')).toBe(true);
      expect(refused).toMatchObject({ resource, token: 6n, highest: 7n });
      expect(ran).toBe(false);
      expect(await guard.highest()).toBe(7n);
      expect(await harness.effects(resource)).toEqual([5n, 5n, 7n]);
    });

    it("fn's error rolls everything back, the fence included, and reaches the caller untouched", async () => {
      const resource = name();
      const guard = harness.guard(resource);
      await guard.guardedWrite(3n, async () => undefined);
      const mine = new Error('the handler failed');
      const thrown = await guard
        .guardedWrite(9n, async (trx) => {
          await harness.insertEffect(trx, resource, 9n);
          throw mine;
        })
        .catch((err: unknown) => err);
      expect(thrown).toBe(mine);
      expect(await guard.highest()).toBe(3n);
      expect(await harness.effects(resource)).toEqual([]);
    });

    it('under concurrency, effects commit in token order: none of a lower token after a higher one, and the fence ends at the highest', async () => {
      const resource = name();
      const guard = harness.guard(resource);
      const tokens = Array.from({ length: 40 }, (_, i) => BigInt(1 + ((i * 37) % 23)));
      const outcomes = await Promise.allSettled(tokens.map((token) => guard.guardedWrite(token, (trx) => harness.insertEffect(trx, resource, token))));
      for (const outcome of outcomes) if (outcome.status === 'rejected') expect(isFencedError(outcome.reason, 'STALE_TOKEN')).toBe(true);
      const committed = await harness.effects(resource);
      expect(committed.length).toBe(outcomes.filter((o) => o.status === 'fulfilled').length);
      for (let i = 1; i < committed.length; i++) expect(committed[i]!).toBeGreaterThanOrEqual(committed[i - 1]!);
      expect(await guard.highest()).toBe(tokens.reduce((a, b) => (a > b ? a : b)));
    });

    it('the check and the mutation are one transaction: a higher write waits for a checked write still in fn, then the lower one is refused', async () => {
      const resource = name();
      const guard = harness.guard(resource);
      await guard.guardedWrite(5n, async () => undefined);
      const inFn = gate();
      const release = gate();
      const first = guard.guardedWrite(5n, async (trx) => {
        inFn.open();
        await release.promise;
        await harness.insertEffect(trx, resource, 5n);
      });
      await inFn.promise;
      let higherDone = false;
      const higher = guard.guardedWrite(6n, (trx) => harness.insertEffect(trx, resource, 6n)).finally(() => (higherDone = true));
      try {
        // The higher write must be waiting on the checked write's lock, not committing past it: a
        // check made outside the write's transaction (a read, then the write) lets it through here.
        await harness.waitForLockWait();
        expect(higherDone).toBe(false);
      } finally {
        // Whatever failed above, the first write ends: a bug fails this test, it never hangs it.
        release.open();
      }
      await Promise.all([first, higher]);
      expect(await harness.effects(resource)).toEqual([5n, 6n]);
      const late = await guard.guardedWrite(5n, (trx) => harness.insertEffect(trx, resource, 5n)).catch((err: unknown) => err);
      expect(isFencedError(late, 'STALE_TOKEN')).toBe(true);
    });

    it('a write that waited for the lock reads, in fn, what committed before its check (whatever the isolation level)', async () => {
      for (const isolationLevel of ['read committed', 'repeatable read'] as const) {
        const resource = name();
        const guard = harness.guard(resource, { isolationLevel });
        const inFn = gate();
        const release = gate();
        const first = guard.guardedWrite(1n, async (trx) => {
          inFn.open();
          await release.promise;
          await harness.insertEffect(trx, resource, 1n);
        });
        await inFn.promise;
        let seen = -1;
        const lower = guard.guardedWrite(1n, async (trx) => {
          seen = await harness.countEffectsIn(trx, resource);
        });
        try {
          await harness.waitForLockWait();
        } finally {
          release.open();
        }
        await Promise.all([first, lower]);
        // The equal write waited behind the first one: its plain read sees the first one's row.
        expect(seen, isolationLevel).toBe(1);
      }
    });

    it('claims a fire once: of many concurrent writes of one fire, exactly one applies and the others are refused as duplicates', async () => {
      const resource = name();
      const guard = harness.guard(resource);
      const outcomes = await Promise.allSettled(
        Array.from({ length: 12 }, () => guard.guardedWrite(4n, (trx) => harness.insertEffect(trx, resource, 4n), { fireId: 'job@20261202T100000.000Z' })),
      );
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
      for (const o of outcomes) if (o.status === 'rejected') expect(isFencedError(o.reason, 'DUPLICATE_FIRE')).toBe(true);
      expect(await harness.effects(resource)).toEqual([4n]);
      // A stale dispatch of the same fire is reported as stale, not as a duplicate.
      await guard.guardedWrite(8n, async () => undefined);
      const stale = await guard.guardedWrite(4n, async () => undefined, { fireId: 'job@20261202T100000.000Z' }).catch((err: unknown) => err);
      expect(isFencedError(stale, 'STALE_TOKEN')).toBe(true);
      // Another resource claims the same fire id on its own.
      await harness.guard(name()).guardedWrite(4n, async () => undefined, { fireId: 'job@20261202T100000.000Z' });
    });

    it("records a fire's outcome with its claim in the same transaction, reads it back, and records nothing when the write fails", async () => {
      const resource = name();
      const guard = harness.guard(resource);
      const fireId = 'ledger@20261202T100000.000Z';
      // fn's error: nothing applied, nothing claimed, nothing recorded.
      const failed = guard.guardedWrite(
        3n,
        async (trx) => {
          await harness.insertEffect(trx, resource, 3n);
          throw new Error('route failed');
        },
        { fireId, recordOutcome: () => 'never' },
      );
      await expect(failed).rejects.toThrow('route failed');
      // The recorder's own error aborts the write like fn's: the effect is rolled back.
      const unrecordable = guard.guardedWrite(3n, (trx) => harness.insertEffect(trx, resource, 3n), {
        fireId,
        recordOutcome: () => {
          throw new RangeError('reply too large');
        },
      });
      await expect(unrecordable).rejects.toThrow('reply too large');
      expect(await harness.effects(resource)).toEqual([]);
      expect(await guard.appliedOutcome(fireId)).toBeNull();

      // Quotes, backslashes, non-ASCII and 60 kB: kept exactly.
      const text = JSON.stringify({ status: 201, body: { note: `it's \\ "é✓🙂"`, pad: 'x'.repeat(60_000) } });
      const result = await guard.guardedWrite(
        3n,
        async (trx) => {
          await harness.insertEffect(trx, resource, 3n);
          return 42;
        },
        { fireId, recordOutcome: (value) => `${text}|${value}` },
      );
      expect(result).toBe(42);
      expect(await guard.appliedOutcome(fireId)).toMatchObject({ token: 3n, outcome: `${text}|42` });

      // Concurrent duplicates: none runs fn, and the first outcome stays.
      let ran = 0;
      const again = await Promise.allSettled(
        Array.from({ length: 4 }, () =>
          guard.guardedWrite(
            3n,
            async () => {
              ran++;
            },
            { fireId, recordOutcome: () => 'second' },
          ),
        ),
      );
      for (const o of again) expect(o.status === 'rejected' && isFencedError(o.reason, 'DUPLICATE_FIRE')).toBe(true);
      expect(ran).toBe(0);
      expect((await guard.appliedOutcome(fireId))?.outcome).toBe(`${text}|42`);

      // A fire applied without an outcome has a claim and no outcome; one never applied has neither.
      await guard.guardedWrite(3n, async () => undefined, { fireId: 'other@20261202T100000.000Z' });
      expect(await guard.appliedOutcome('other@20261202T100000.000Z')).toMatchObject({ token: 3n, outcome: null });
      expect(await guard.appliedOutcome('never@20261202T100000.000Z')).toBeNull();
      // An outcome without a fire to record it beside is refused before anything is sent.
      const loose = guard.guardedWrite(3n, (trx) => harness.insertEffect(trx, resource, 3n), { recordOutcome: () => 'x' });
      await expect(loose).rejects.toThrow(TypeError);
      expect(await harness.effects(resource)).toEqual([3n]);
    });

    it('keeps tokens exact up to 2^63 - 1', async () => {
      const resource = name();
      const guard = harness.guard(resource);
      await guard.guardedWrite(MAX_TOKEN - 1n, async () => undefined);
      expect(await guard.highest()).toBe(MAX_TOKEN - 1n);
      const stale = await guard.guardedWrite(MAX_TOKEN - 2n, async () => undefined).catch((err: unknown) => err);
      expect(stale).toMatchObject({ code: 'STALE_TOKEN', highest: MAX_TOKEN - 1n });
      await guard.guardedWrite(MAX_TOKEN, (trx) => harness.insertEffect(trx, resource, MAX_TOKEN));
      expect(await guard.highest()).toBe(MAX_TOKEN);
      expect(await harness.effects(resource)).toEqual([MAX_TOKEN]);
      await expect(guard.advance(MAX_TOKEN)).rejects.toMatchObject({ code: 'FENCE_AHEAD' });
    });

    it('refuses bad input with a typed error before anything is sent, and changes nothing', async () => {
      const resource = name();
      const guard = harness.guard(resource);
      await guard.guardedWrite(10n, async () => undefined);
      let ran = 0;
      const fn = async () => void ran++;
      const bad: Array<[string, () => Promise<unknown>, string]> = [
        ['a word', () => guard.guardedWrite('ten' as never, fn), 'INVALID_TOKEN'],
        ['zero', () => guard.guardedWrite(0n, fn), 'INVALID_TOKEN'],
        ['negative', () => guard.guardedWrite(-11n, fn), 'INVALID_TOKEN'],
        ['a fraction', () => guard.guardedWrite(11.5 as never, fn), 'INVALID_TOKEN'],
        ['2^63', () => guard.guardedWrite(2n ** 63n, fn), 'INVALID_TOKEN'],
        ['an unsafe number', () => guard.guardedWrite(2 ** 60 as never, fn), 'INVALID_TOKEN'],
        ['a bad resource', () => guard.guardedWrite(11n, fn, { resource: '' }), 'INVALID_RESOURCE'],
        ['a bad fire id', () => guard.guardedWrite(11n, fn, { fireId: '' }), ''],
        ['fn not a function', () => guard.guardedWrite(11n, 'not a function' as never), ''],
        ['lowering without a reason', () => guard.lowerFence({ token: 1n, actor: 'ops', reason: ' ' }), 'INVALID_CONFIG'],
      ];
      for (const [what, call, code] of bad) {
        const err = await call().catch((e: unknown) => e);
        expect(err, what).toBeInstanceOf(Error);
        if (code !== '') expect((err as { code?: string }).code, what).toBe(code);
      }
      expect(ran).toBe(0);
      expect(await guard.highest()).toBe(10n);
    });

    it('advances strictly, and an election does not wait forever for a frozen writer of a lower token', async () => {
      const resource = name();
      const { logger, heard } = eventsOf(resource);
      const guard = harness.guard(resource, { takeover: { graceMs: 100, timeoutMs: 5000 }, logger });
      await guard.advance(3n);
      await expect(guard.advance(3n)).rejects.toMatchObject({ code: 'FENCE_AHEAD', highest: 3n });
      await expect(guard.advance(2n)).rejects.toMatchObject({ code: 'FENCE_AHEAD' });
      // A leader frozen inside its guarded transaction: fn never returns on its own.
      const inFn = gate();
      const never = gate();
      const frozen = guard
        .guardedWrite(3n, async (trx) => {
          await harness.insertEffect(trx, resource, 3n);
          inFn.open();
          await never.promise;
        })
        .catch((err: unknown) => err);
      await inFn.promise;
      try {
        await guard.advance(4n);
      } finally {
        never.open();
      }
      expect(await guard.highest()).toBe(4n);
      // Its session was ended: nothing of the old term was applied.
      const outcome = await frozen;
      expect(isFencedError(outcome, 'GUARD_UNAVAILABLE') || isFencedError(outcome, 'STALE_TOKEN')).toBe(true);
      expect(await harness.effects(resource)).toEqual([]);
      // The takeover says whom it ended: the frozen writer of token 3, for the advance to 4.
      const takeovers = heard().filter((event) => event.type === 'guard.takeover');
      expect(takeovers).toEqual([expect.objectContaining({ token: 4n, blockingToken: 3n, ended: true })]);
    });

    // The takeover ends only a writer of a lower token: a writer of the token being advanced to (the
    // new leader's own first write, racing its election's advance) or of a higher one is let be.
    it.each([
      ['the same token as the advance', 6n],
      ['a higher token than the advance', 7n],
    ])('never ends a writer of %s: the advance waits, then is refused by the fence it committed', async (_label, writer) => {
      const resource = name();
      const { logger, heard } = eventsOf(resource);
      const guard = harness.guard(resource, { takeover: { graceMs: 50, timeoutMs: 5000 }, logger });
      await guard.advance(5n);
      const finish = await holdWrite(guard, resource, writer);
      const advance = guard.advance(6n).catch((err: unknown) => err);
      try {
        await harness.waitForLockWait();
        // A claim that something does not happen needs a window: ten grace periods of the waiting
        // advance, each a chance for its takeover to end the newer write (which then fails below).
        const seen = performance.now();
        await waitFor(() => performance.now() - seen > 10 * 50, 5000);
      } finally {
        await finish();
      }
      expect(await advance).toMatchObject({ code: 'FENCE_AHEAD', highest: writer });
      expect(await harness.effects(resource)).toEqual([writer]);
      // Nobody was ended, and nobody is said to have been.
      expect(heard().filter((event) => event.type === 'guard.takeover')).toEqual([]);
    });

    it('a session killed under fn fails the write closed (nothing applied, typed error), and the guard goes on', async () => {
      const resource = name();
      const guard = harness.guard(resource);
      const thrown = await guard
        .guardedWrite(2n, async (trx) => {
          await harness.insertEffect(trx, resource, 2n);
          await harness.kill(await harness.sessionOf(trx));
          await harness.insertEffect(trx, resource, 2n);
        })
        .catch((err: unknown) => err);
      expect(isFencedError(thrown, 'GUARD_UNAVAILABLE')).toBe(true);
      expect(await harness.effects(resource)).toEqual([]);
      expect(await guard.highest()).toBe(null);
      await guard.guardedWrite(2n, (trx) => harness.insertEffect(trx, resource, 2n));
      expect(await harness.effects(resource)).toEqual([2n]);
    });

    it('tells its logger what each write, advance and lowering came to, with the tokens involved', async () => {
      const resource = name();
      const { logger, heard } = eventsOf(resource);
      const guard = harness.guard(resource, { logger });
      const fireId = 'invoices@20261202T090000.000Z';
      await guard.guardedWrite(5n, (trx) => harness.insertEffect(trx, resource, 5n), { fireId });
      await guard.guardedWrite(5n, async () => undefined, { fireId }).catch(() => undefined);
      await guard.guardedWrite(4n, async () => undefined).catch(() => undefined);
      // fn's own failure is not the store's: the guard is not unavailable.
      await guard.guardedWrite(5n, async () => Promise.reject(new Error('the write failed'))).catch(() => undefined);
      await guard.fence(resource).advance(parseToken(8n));
      await guard.lowerFence({ token: 6n, actor: 'ops@example', reason: 'a forged token poisoned the fence' });
      await guard
        .guardedWrite(6n, async (trx) => {
          await harness.kill(await harness.sessionOf(trx));
          await harness.insertEffect(trx, resource, 6n);
        })
        .catch(() => undefined);
      // A retry, or the driver's word that a connection went, may come or not as timing falls.
      const told = heard().filter((event) => event.type !== 'guard.retry' && event.type !== 'guard.connection-lost');
      expect(told.map((event) => event.type)).toEqual(['token.accepted', 'guard.duplicate', 'token.rejected', 'fence.advanced', 'fence.lowered', 'guard.unavailable']);
      expect(told).toEqual([
        { type: 'token.accepted', resource, token: 5n },
        { type: 'guard.duplicate', resource, token: 5n, fireId },
        { type: 'token.rejected', resource, token: 4n, highest: 5n, via: harness.name },
        { type: 'fence.advanced', resource, token: 8n },
        { type: 'fence.lowered', resource, from: 8n, to: 6n, actor: 'ops@example', reason: 'a forged token poisoned the fence' },
        expect.objectContaining({ type: 'guard.unavailable', resource }),
      ]);
    });

    it('lowers a fence only as an audited act, and reads back fences, applied fires and the audit', async () => {
      const resource = name();
      const other = name();
      const guard = harness.guard(resource);
      const since = new Date(Date.now() - 60_000);
      // A write with no fire claims nothing; then the 11:00 fire, and the 10:00 one caught up after it.
      await guard.guardedWrite(40n, async () => undefined);
      await guard.guardedWrite(50n, async () => undefined, { fireId: 'invoices@20261202T110000.000Z' });
      const between = Date.now();
      await waitFor(() => Date.now() > between + 2, 5000);
      await guard.guardedWrite(50n, async () => undefined, { fireId: 'invoices@20261202T100000.000Z' });
      // Applied last: the caught-up fire. The job's latest fire: 11:00, whatever the order applied.
      expect(await guard.lastAppliedFire()).toMatchObject({ fireId: 'invoices@20261202T100000.000Z', token: 50n });
      expect(await guard.lastAppliedFires(since)).toEqual(new Map([['invoices', Date.parse('2026-12-02T11:00:00.000Z')]]));
      expect(await guard.fence(resource).lastAppliedFires!(since)).toEqual(new Map([['invoices', Date.parse('2026-12-02T11:00:00.000Z')]]));
      expect(await guard.lastAppliedFires(new Date(Date.now() + 60_000))).toEqual(new Map());
      // Since the very millisecond a fire was applied: it counts.
      const { appliedAt } = (await guard.lastAppliedFire())!;
      expect(await guard.lastAppliedFires(appliedAt)).toEqual(new Map([['invoices', Date.parse('2026-12-02T10:00:00.000Z')]]));
      expect(await guard.lowerFence({ token: 20n, actor: 'ops@example', reason: 'a forged token poisoned the fence' })).toBe(50n);
      expect(await guard.highest()).toBe(20n);
      expect(await guard.fence(resource).highest()).toBe(20n);
      expect(await harness.guard(other).lowerFence({ token: 7n, actor: 'oncall@example', reason: 'another resource' })).toBe(null);
      const [entry] = await guard.auditLog(resource, 1);
      expect(entry).toMatchObject({ resource, from: 50n, to: 20n, actor: 'ops@example', reason: 'a forged token poisoned the fence' });
      // Per resource, or across them, newest first.
      expect((await guard.auditLog(resource)).map((e) => e.resource)).toEqual([resource]);
      expect((await guard.auditLog(undefined, 1)).map((e) => e.resource)).toEqual([other]);
      expect((await guard.auditLog(undefined, 2)).map((e) => [e.resource, e.to])).toEqual([
        [other, 7n],
        [resource, 20n],
      ]);
      const inspection = await guard.inspect();
      expect(inspection.store).toBe(harness.name);
      expect(inspection.migrations.applied).toBeGreaterThan(0);
      expect(inspection.migrations.applied).toBe(inspection.migrations.known);
      expect(inspection.appliedFires.rows).toBeGreaterThanOrEqual(2);
      expect(inspection.appliedFires.oldest).toBeInstanceOf(Date);
      const report = inspection.fences.find((f) => f.resource === resource);
      expect(report).toMatchObject({ token: 20n, appliedFires: 2, lastAppliedFire: { fireId: 'invoices@20261202T100000.000Z', token: 50n } });
      // The oldest record is the first fire's, applied before the other by more than a millisecond.
      expect(report!.oldestAppliedAt!.getTime()).toBeLessThan(report!.lastAppliedFire!.appliedAt.getTime());
      expect(inspection.fences.find((f) => f.resource === other)).toMatchObject({ token: 7n, appliedFires: 0, lastAppliedFire: null, oldestAppliedAt: null });
      // Pruning by age: records an hour old go, these stay; at age 0 they go too.
      await guard.pruneAppliedFires(3_600_000);
      expect((await guard.lastAppliedFire())?.fireId).toBe('invoices@20261202T100000.000Z');
      expect(await guard.pruneAppliedFires(0)).toBeGreaterThanOrEqual(2);
      expect(await guard.lastAppliedFire()).toBe(null);
    });

    it('two lowerings that meet wait for each other: the audit chains them (each records the fence the other left), and 1, the lowest token, is a fence too', async () => {
      // Both wait on a write of the fence's own token, which shares the row. A lowering that read the
      // fence without its lock would record a fence another lowering had already replaced; one that
      // only shared the row would deadlock with the other when both go to write it.
      const resource = name();
      const writer = harness.guard(resource);
      await writer.guardedWrite(50n, (trx) => harness.insertEffect(trx, resource, 50n));
      const finish = await holdWrite(writer, resource, 50n);
      const operators = [harness.guard(resource), harness.guard(resource)];
      const lowerings = [
        operators[0]!.lowerFence({ token: 30n, actor: 'ops@example', reason: 'a forged token poisoned the fence' }),
        operators[1]!.lowerFence({ token: 20n, actor: 'oncall@example', reason: 'the same incident, a second hand' }),
      ];
      try {
        await harness.waitForLockWait(2);
      } finally {
        await finish();
      }
      const previous = await Promise.all(lowerings);
      const thirtyFirst = previous[0] === 50n;
      expect(previous).toEqual(thirtyFirst ? [50n, 30n] : [20n, 50n]);
      const last = thirtyFirst ? 20n : 30n;
      expect(await writer.highest()).toBe(last);
      const audit = await writer.auditLog(resource, 2);
      expect(audit.map((entry) => [entry.from, entry.to])).toEqual(thirtyFirst ? [[30n, 20n], [50n, 30n]] : [[20n, 30n], [50n, 20n]]);
      expect(await writer.lowerFence({ token: 1n, actor: 'ops@example', reason: 'start the resource over' })).toBe(last);
      expect(await writer.highest()).toBe(1n);
      await writer.guardedWrite(2n, (trx) => harness.insertEffect(trx, resource, 2n));
      expect(await harness.effects(resource)).toEqual([50n, 50n, 2n]);
    });

    it('a writer that saw a fence before another process lowered it compares what it meets as numbers, whatever their digit counts', async () => {
      // A writer keeps what it last saw of each fence (its hint of which path a write takes): another
      // process lowers the fence under it, from three digits to one; the tokens the writer then
      // writes have two digits, between the two fences (as text, '10' < '9' < '100').
      const resource = name();
      const writer = harness.guard(resource);
      const operator = harness.guard(resource);
      await writer.guardedWrite(100n, (trx) => harness.insertEffect(trx, resource, 100n));
      expect(await operator.lowerFence({ token: 9n, actor: 'ops@example', reason: 'a forged token poisoned the fence' })).toBe(100n);
      // First, while the writer still believes the fence is 100: it meets 9 and must raise it to 10.
      await writer.guardedWrite(10n, (trx) => harness.insertEffect(trx, resource, 10n));
      await writer.guardedWrite(10n, (trx) => harness.insertEffect(trx, resource, 10n));
      expect(await operator.highest()).toBe(10n);
      for (const token of [9n, 8n]) {
        const stale = await writer.guardedWrite(token, (trx) => harness.insertEffect(trx, resource, token)).catch((err: unknown) => err);
        expect(stale).toMatchObject({ code: 'STALE_TOKEN', highest: 10n });
      }
      expect(await harness.effects(resource)).toEqual([100n, 10n, 10n]);
    });

    it('answers which of a list of fires were applied, on its own resource only, and refuses a bad fire id', async () => {
      const resource = name();
      const guard = harness.guard(resource);
      const other = harness.guard(name());
      const fire = (hour: number) => `invoices@20261202T${String(hour).padStart(2, '0')}0000.000Z`;
      await guard.guardedWrite(5n, async () => undefined, { fireId: fire(10) });
      await guard.guardedWrite(5n, async () => undefined, { fireId: fire(12) });
      await other.guardedWrite(5n, async () => undefined, { fireId: fire(11) });
      // A write that failed claims nothing.
      await guard.guardedWrite(5n, async () => Promise.reject(new Error('the write failed')), { fireId: fire(13) }).catch(() => undefined);
      expect(await guard.appliedFireIds([])).toEqual(new Set());
      expect(await guard.appliedFireIds([fire(9), fire(10), fire(11), fire(12), fire(13)])).toEqual(new Set([fire(10), fire(12)]));
      expect(await guard.fence(resource).appliedFireIds!([fire(12), fire(11)])).toEqual(new Set([fire(12)]));
      // More ids than one query of a store may carry.
      const many = Array.from({ length: 1200 }, (_, k) => `invoices@${k}`);
      expect(await guard.appliedFireIds([...many, fire(12)])).toEqual(new Set([fire(12)]));
      await expect(guard.appliedFireIds(['bad\u0000id'])).rejects.toMatchObject({ code: 'INVALID_ENVELOPE' });
    });

    it('migrates idempotently, concurrently, and refuses an installation a newer version migrated', async () => {
      const guard = harness.guard(name());
      await Promise.all([guard.migrate(), guard.migrate(), harness.guard(name()).migrate()]);
      const newer = await harness.recordNewerMigration();
      try {
        await expect(guard.migrate()).rejects.toMatchObject({ code: 'SCHEMA_TOO_NEW' });
      } finally {
        await newer.undo();
      }
      await guard.migrate();
    });

    // An optional role: run where the store offers it, skipped with the store's reason where not.
    const writeIn = 'without' in harness.writeIn ? null : harness.writeIn;
    const skippedWhy = 'without' in harness.writeIn ? ` (skipped: ${harness.writeIn.without})` : '';
    describe(`writeIn: the check inside a transaction the caller holds${skippedWhy}`, () => {
      /** A maker of envelopes of distinct fires of one job (on `hour` of a day), each of the token given. */
      const firesOn = (hour: number) => {
        let at = 0;
        return (token: bigint): Envelope => createEnvelope({ job: 'batch', scheduledAt: Date.UTC(2026, 11, 4, hour, 0, 0, at++), token: parseToken(token), issuer: 'node-a', payload: null });
      };
      /** A transactional handler each of whose fires writes one effect of its token on `resource`. */
      const effectHandler = (guard: Guard<unknown>, resource: string) => guard.wrapTransactionalHandler(async (_payload, ctx) => ctx.guardedWrite((tx) => writeIn!.insertEffectIn(tx, resource, ctx.token)));

      it.skipIf(writeIn === null)('refuses a lower token with fn never run; an accepted write, its fence raise and its fire claim commit or roll back with the caller', async () => {
        const role = writeIn!;
        const resource = name();
        const guard = role.guard(resource);
        await guard.advance(5n);
        let ran = false;
        let caller = await role.begin();
        await expect(guard.guardedWriteIn(caller.tx, 4n, async () => void (ran = true))).rejects.toMatchObject({ code: 'STALE_TOKEN', highest: 5n });
        await caller.rollback();
        expect(ran).toBe(false);
        // Rolled back by the caller: nothing of it stays, neither the effect nor the raise nor the claim.
        caller = await role.begin();
        await guard.guardedWriteIn(caller.tx, 6n, (tx) => role.insertEffectIn(tx, resource, 6n), { fireId: 'f-1' });
        await caller.rollback();
        expect(await guard.highest()).toBe(5n);
        expect(await harness.effects(resource)).toEqual([]);
        expect([...(await guard.appliedFireIds(['f-1']))]).toEqual([]);
        // Committed by the caller: all of it at once.
        caller = await role.begin();
        await guard.guardedWriteIn(caller.tx, 6n, (tx) => role.insertEffectIn(tx, resource, 6n), { fireId: 'f-1' });
        await caller.commit();
        expect(await guard.highest()).toBe(6n);
        expect(await harness.effects(resource)).toEqual([6n]);
        expect([...(await guard.appliedFireIds(['f-1']))]).toEqual(['f-1']);
        // The same fire again, in another transaction: a duplicate, fn never run.
        caller = await role.begin();
        await expect(guard.guardedWriteIn(caller.tx, 6n, async () => void (ran = true), { fireId: 'f-1' })).rejects.toMatchObject({ code: 'DUPLICATE_FIRE' });
        await caller.rollback();
        expect(ran).toBe(false);
      });

      it.skipIf(writeIn === null)("a refusal takes back all of the guard's part and only it: a raise before a refused claim is undone, the caller's own work around it commits", async () => {
        const role = writeIn!;
        const resource = name();
        const guard = role.guard(resource);
        await guard.advance(5n);
        let caller = await role.begin();
        await guard.guardedWriteIn(caller.tx, 5n, (tx) => role.insertEffectIn(tx, resource, 5n), { fireId: 'f-1' });
        await caller.commit();
        caller = await role.begin();
        await role.insertEffectIn(caller.tx, resource, 1n);
        // Token 7 would raise the fence, then its claim meets f-1's: refused, the raise with it.
        await expect(guard.guardedWriteIn(caller.tx, 7n, (tx) => role.insertEffectIn(tx, resource, 7n), { fireId: 'f-1' })).rejects.toMatchObject({ code: 'DUPLICATE_FIRE' });
        await role.insertEffectIn(caller.tx, resource, 2n);
        await caller.commit();
        expect(await guard.highest()).toBe(5n);
        expect(await harness.effects(resource)).toEqual([5n, 1n, 2n]);
      });

      it.skipIf(writeIn === null)("a batch in the caller's transaction is judged in order as one write after another: stale below the fence the fires before it left, a fire twice a duplicate, the rest applied, alike on both paths", async () => {
        const role = writeIn!;
        const fire = firesOn(10);
        const envelopes = [fire(5n), fire(5n), fire(7n), fire(6n), fire(7n)];
        envelopes.splice(2, 0, envelopes[1]!); // the same fire twice in one batch
        const statuses: Record<string, string[]> = {};
        for (const path of ['batch', 'one by one'] as const) {
          const resource = name();
          const guard = role.guard(resource);
          const handle = effectHandler(guard, resource);
          const caller = await role.begin();
          const outcomes = [];
          if (path === 'batch') outcomes.push(...(await handle.batch(envelopes, caller.tx)));
          else for (const envelope of envelopes) outcomes.push(await handle(envelope, caller.tx));
          await caller.commit();
          statuses[path] = outcomes.map((o) => o.status);
          expect(outcomes[4]).toMatchObject({ status: 'stale', highest: 7n });
          expect(await guard.highest()).toBe(7n);
          expect(await harness.effects(resource)).toEqual([5n, 5n, 7n, 7n]);
          expect(new Set(await guard.appliedFireIds(envelopes.map((e) => e.fireId)))).toEqual(new Set([0, 1, 3, 5].map((i) => envelopes[i]!.fireId)));
        }
        expect(statuses['batch']).toEqual(['applied', 'applied', 'duplicate', 'applied', 'stale', 'applied']);
        expect(statuses['batch']).toEqual(statuses['one by one']);
      });

      it.skipIf(writeIn === null)('a caller whose transaction read before a raise committed still meets the newest fence: a token between is refused, and the fence never goes down to it', async () => {
        const role = writeIn!;
        const resource = name();
        const guard = role.guard(resource);
        await guard.advance(5n);
        const caller = await role.begin();
        try {
          expect(await role.countEffectsIn(caller.tx, resource)).toBe(0);
          // Another process raises the fence and commits, after the caller's snapshot was taken.
          await harness.guard(resource).advance(10n);
          await expect(guard.guardedWriteIn(caller.tx, 7n, (tx) => role.insertEffectIn(tx, resource, 7n))).rejects.toMatchObject({ code: 'STALE_TOKEN', highest: 10n });
        } finally {
          await caller.rollback();
        }
        expect(await guard.highest()).toBe(10n);
        expect(await harness.effects(resource)).toEqual([]);
      });

      it.skipIf(writeIn === null)("a batch holds the fence's lock until the caller's transaction ends, also when it only shares the fence: batches of that token go on side by side, an advance waits for them; the lowest token, 1, is a batch's token too", async () => {
        const role = writeIn!;
        const resource = name();
        const guard = role.guard(resource);
        const handle = effectHandler(guard, resource);
        const fire = firesOn(11);
        let caller = await role.begin();
        expect((await handle.batch([fire(1n), fire(1n)], caller.tx)).map((o) => o.status)).toEqual(['applied', 'applied']);
        await caller.commit();
        await guard.advance(5n);
        // The fence is at the batch's token: the batch shares the row, and still holds it. Another
        // batch of that token goes on beside it; an advance waits for both.
        caller = await role.begin();
        expect((await handle.batch([fire(5n), fire(5n)], caller.tx)).map((o) => o.status)).toEqual(['applied', 'applied']);
        const beside = await role.begin();
        let advanced = false;
        let advancing: Promise<void> | undefined;
        try {
          expect(await resultWithin(handle.batch([fire(5n)], beside.tx).then((outcomes) => outcomes.map((o) => o.status)), 20_000, ['still waiting after 20 s'])).toEqual(['applied']);
          advancing = guard.advance(6n).then(() => void (advanced = true));
          await harness.waitForLockWait();
          expect(advanced).toBe(false);
        } finally {
          await caller.commit();
          await beside.commit();
        }
        await advancing;
        caller = await role.begin();
        expect((await handle.batch([fire(5n)], caller.tx)).map((o) => o.status)).toEqual(['stale']);
        await caller.rollback();
        expect(await harness.effects(resource)).toEqual([1n, 1n, 5n, 5n, 5n]);
      });

      it.skipIf(writeIn === null)('a batch that raises the fence meets raises in flight without harm: it judges its fires by the fence they commit, never lowers it, and two such batches that wait together both go through', async () => {
        const role = writeIn!;
        const fire = firesOn(12);
        // A raise to 60 in flight; a batch of token 55 waits for it, then finds 55 stale.
        const first = name();
        const guard = role.guard(first);
        const handle = effectHandler(guard, first);
        await guard.advance(50n);
        let finish = await holdWrite(harness.guard(first), first, 60n);
        const caller = await role.begin();
        const judged = handle.batch([fire(55n)], caller.tx);
        try {
          await harness.waitForLockWait();
        } finally {
          await finish();
        }
        expect(await judged).toMatchObject([{ status: 'stale', highest: 60n }]);
        await caller.commit();
        expect(await guard.highest()).toBe(60n);
        expect(await harness.effects(first)).toEqual([60n]);
        // A write of the fence's own token in flight; two batches of a higher token wait for it together.
        const second = name();
        const other = role.guard(second);
        const handleOther = effectHandler(other, second);
        await other.advance(50n);
        finish = await holdWrite(harness.guard(second), second, 50n);
        const callers = [await role.begin(), await role.begin()];
        const batches = callers.map((c) => handleOther.batch([fire(55n)], c.tx).then(async (outcomes) => {
          await c.commit();
          return outcomes.map((o) => o.status);
        }));
        try {
          await harness.waitForLockWait(2);
        } finally {
          await finish();
        }
        expect(await Promise.all(batches)).toEqual([['applied'], ['applied']]);
        expect(await other.highest()).toBe(55n);
        expect(await harness.effects(second)).toEqual([50n, 55n, 55n]);
      });

      it.skipIf(writeIn === null)("holds the fence's lock until the caller's transaction ends: a higher write waits for it, and a lower one after it is refused", async () => {
        const role = writeIn!;
        const resource = name();
        const guard = role.guard(resource);
        await guard.advance(1n);
        const caller = await role.begin();
        await guard.guardedWriteIn(caller.tx, 3n, (tx) => role.insertEffectIn(tx, resource, 3n));
        const higher = guard.guardedWrite(4n, (trx) => harness.insertEffect(trx, resource, 4n));
        try {
          await harness.waitForLockWait();
        } finally {
          await caller.commit();
        }
        await higher;
        await expect(guard.guardedWrite(3n, async () => undefined)).rejects.toMatchObject({ code: 'STALE_TOKEN', highest: 4n });
        expect(await harness.effects(resource)).toEqual([3n, 4n]);
      });
    });
  });
}
