// The lease-checked-writes conformance suite: what a guard's `checkLease` promises with the lease store
// beside its fences in one database, written once and run against each pair (conformance-<db>.test.ts,
// one harness each). A write commits only while its token holds its lease, checked in the write's own
// transaction under a lock the next grant waits for; renewals never wait for writes; a grant ends a
// frozen writer of an expired term, never one of a live term.
import { isFencedError, parseToken, type FencedEvent, type Token } from '@fenced/shared';
import type { LeaseBackend } from '@fenced/coordinator';

type LeaseStore = ReturnType<LeaseBackend['openLease']>;
import { waitFor } from '#test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** A guard whose writes are lease-checked: the part of every store's guard the suite drives. */
export interface LeaseCheckedGuard {
  guardedWrite(token: Token, fn: (connection: never) => Promise<unknown>, options?: { issuer?: string }): Promise<unknown>;
  guardedWriteIn(tx: never, token: Token, fn: (connection: never) => Promise<unknown>, options?: { issuer?: string }): Promise<unknown>;
}

/** A transaction the caller opened on a connection of its own (the driver's, as a user has it). */
export interface CallerTransaction {
  /** What `guardedWriteIn` joins: the connection, its transaction open. */
  readonly tx: never;
  /** Ends the transaction (rolled back) and gives the connection back. */
  end(): Promise<void>;
}

export interface LeaseCheckedHarness {
  readonly name: string;
  /** Creates the database, migrates the guard and the lease store, and an `effects (token)` table. */
  setup(): Promise<void>;
  teardown(): Promise<void>;
  /** The lease store, its grants waiting and ending blockers as `takeover` says, opening `lease` for `nodeId`. */
  openLease(lease: string, nodeId: string, takeover: { graceMs: number; timeoutMs: number }): LeaseStore;
  /** A guard on `resource` whose writes check `lease`, reporting its events to `logger`. */
  guard(resource: string, lease: string, logger: (event: FencedEvent) => void): LeaseCheckedGuard;
  /** A write's body: inserts an effect of `token` on the write's connection. */
  insert(token: bigint): (connection: never) => Promise<unknown>;
  /** How many effects of `token` committed. */
  rows(token: bigint): Promise<number>;
  /** Whether `lease` is free or expired by the server's clock now. */
  expired(lease: string): Promise<boolean>;
  /** Whether a grant is waiting on a row lock now. */
  grantWaiting(): Promise<boolean>;
  /**
   * Opens a REPEATABLE READ transaction on a connection of its own and reads `lease`'s row in it, so
   * its snapshot (and, where the database has one, its transaction clock) is of this moment.
   */
  beginReading(lease: string): Promise<CallerTransaction>;
}

let n = 0;
/** The effect another lease's write inserts: a value no term's token reaches in these tests. */
const OTHER_LEASE_EFFECT = 4_000_000_000n;

/**
 * A lease-checked write that freezes inside its transaction once its row is in (its process stops
 * there); it comes back when `wake()` is called. Resolves once the write holds its locks.
 */
export async function frozenWrite(guard: LeaseCheckedGuard, token: Token, insert: (token: bigint) => (connection: never) => Promise<unknown>) {
  let checked = false;
  let wake!: () => void;
  const write = guard.guardedWrite(token, async (connection) => {
    await insert(token)(connection);
    checked = true;
    await new Promise<void>((resolve) => (wake = resolve));
  });
  write.catch(() => undefined); // awaited by the test, after wake()
  await waitFor(() => checked, 5000);
  return { write, wake: () => wake() };
}

/**
 * Asks for the lease until it is granted, within `withinMs`, and answers the granting reply (or the
 * last one): a grant behind an expired term's write answers not granted when its wait runs out, and
 * the caller asks again, as a coordinator's next attempt would.
 */
export async function acquireUntilWon(store: LeaseStore, ttlMs: number, timeoutMs: number, withinMs: number): Promise<Awaited<ReturnType<LeaseStore['acquire']>>> {
  let reply = await store.acquire(ttlMs, timeoutMs);
  await waitFor(async () => reply.won || (reply = await store.acquire(ttlMs, timeoutMs)).won, withinMs, 20);
  return reply;
}

export function describeLeaseCheckedConformance(harness: LeaseCheckedHarness): void {
  describe(`lease-checked writes conformance: ${harness.name}`, () => {
    beforeAll(() => harness.setup());
    afterAll(() => harness.teardown());

    /** A lease of its own, the store opened for two nodes, and a lease-checked guard on a resource of its own. */
    function setup(takeover = { graceMs: 250, timeoutMs: 10_000 }) {
      const lease = `lc-${harness.name}-${++n}`;
      const events: FencedEvent[] = [];
      const guard = harness.guard(`res-${harness.name}-${n}`, lease, (e) => events.push(e));
      return { lease, a: harness.openLease(lease, 'a', takeover), b: harness.openLease(lease, 'b', takeover), guard, events };
    }
    const { insert, rows } = harness;

    it('commit while the token holds its lease; are refused, with nothing applied, once the lease expired, before any other term has begun', async () => {
      const { lease, a, guard, events } = setup();
      const won = await a.acquire(300, 5000);
      if (!won.won) throw new Error('not granted');
      await guard.guardedWrite(won.token, insert(won.token));
      expect(await rows(won.token)).toBe(1);
      // Nobody else leads, the fence still holds this very token: only the lease can refuse now.
      await waitFor(() => harness.expired(lease), 5000, 20);
      const error = await guard.guardedWrite(won.token, insert(won.token)).catch((err: unknown) => err);
      expect(isFencedError(error, 'NOT_LEADER')).toBe(true);
      expect(await rows(won.token)).toBe(1);
      expect(events).toContainEqual(expect.objectContaining({ type: 'guard.lease-refused', lease, token: won.token }));
    });

    it("judge expiry when the check runs, also inside a transaction the caller opened while the lease still lived (guardedWriteIn)", async () => {
      const { lease, a, guard } = setup();
      const won = await a.acquire(400, 5000);
      if (!won.won) throw new Error('not granted');
      const caller = await harness.beginReading(lease);
      try {
        // Held now: the write in the caller's transaction commits with it (checked, not yet ended).
        await guard.guardedWriteIn(caller.tx, won.token, insert(won.token));
        // The snapshot still shows the lease live; the server's clock says it is over.
        await waitFor(() => harness.expired(lease), 5000, 20);
        const error = await guard.guardedWriteIn(caller.tx, won.token, insert(won.token)).catch((err: unknown) => err);
        expect(isFencedError(error, 'NOT_LEADER')).toBe(true);
      } finally {
        await caller.end();
      }
      expect(await rows(won.token)).toBe(0);
    });

    it('refuse a token that never held the lease, a write that names another node as its issuer, and a term that was released', async () => {
      const { a, guard } = setup();
      const won = await a.acquire(10_000, 5000);
      if (!won.won) throw new Error('not granted');
      expect(isFencedError(await guard.guardedWrite(parseToken(won.token + 1n), insert(won.token + 1n)).catch((err: unknown) => err), 'NOT_LEADER')).toBe(true);
      expect(isFencedError(await guard.guardedWrite(won.token, insert(won.token), { issuer: 'b' }).catch((err: unknown) => err), 'NOT_LEADER')).toBe(true);
      await guard.guardedWrite(won.token, insert(won.token), { issuer: 'a' });
      expect(await a.release(won.leaseValue, 5000)).toBe(true);
      expect(isFencedError(await guard.guardedWrite(won.token, insert(won.token)).catch((err: unknown) => err), 'NOT_LEADER')).toBe(true);
      expect(await rows(won.token)).toBe(1);
    });

    it('a renew does not wait for open writes; an election waits until they end', async () => {
      const { a, b, guard } = setup({ graceMs: 20_000, timeoutMs: 30_000 });
      const won = await a.acquire(400, 5000);
      if (!won.won) throw new Error('not granted');
      const order: string[] = [];
      let finish!: () => void;
      const open = new Promise<void>((resolve) => (finish = resolve));
      const writing = guard.guardedWrite(won.token, async (connection) => {
        order.push('write checked');
        await insert(won.token)(connection);
        await open;
      });
      await waitFor(() => order.includes('write checked'), 5000);
      // The write holds its lock on the lease until it ends: a renew still goes through at once.
      expect((await a.renew(won.leaseValue, 400, () => 5000)).renewed).toBe(true);
      order.push('renewed');
      // Let the lease run out with the write still open: an election must wait for the write.
      const election = (async () => {
        const reply = await acquireUntilWon(b, 10_000, 40_000, 30_000);
        if (!reply.won) throw new Error('not granted');
        return reply;
      })().then((reply) => {
        order.push('elected');
        return reply;
      });
      await waitFor(() => harness.grantWaiting(), 10_000);
      expect(order).not.toContain('elected');
      order.push('write committing');
      finish();
      await writing;
      const next = await election;
      expect(order).toEqual(['write checked', 'renewed', 'write committing', 'elected']);
      expect(next.token).toBeGreaterThan(won.token);
      expect(await rows(won.token)).toBe(1);
    });

    it('an election ends a frozen write of the expired term after its grace period, and the write applies nothing; an open write of another lease goes on', async () => {
      const { a, b, guard } = setup({ graceMs: 200, timeoutMs: 10_000 });
      // Another lease's live term, granted first (so its token is at most the election's: ending
      // writes by their token alone would end it), with a write open through the election.
      const other = setup();
      const otherWon = await other.a.acquire(30_000, 5000);
      if (!otherWon.won) throw new Error('not granted');
      let finishOther!: () => void;
      let otherChecked = false;
      const otherWriting = other.guard.guardedWrite(otherWon.token, async (connection) => {
        await insert(OTHER_LEASE_EFFECT)(connection);
        otherChecked = true;
        await new Promise<void>((resolve) => (finishOther = resolve));
      });
      await waitFor(() => otherChecked, 5000);
      const won = await a.acquire(300, 5000);
      if (!won.won) throw new Error('not granted');
      // Frozen inside its transaction: its process comes back only after the next term has begun.
      const { write: frozen, wake } = await frozenWrite(guard, won.token, insert);
      const startedAt = performance.now();
      const reply = await acquireUntilWon(b, 10_000, 15_000, 15_000);
      // Within the TTL's remainder, a grace period (or InnoDB's lock-table refresh) and the ending, with room for a loaded machine.
      expect(performance.now() - startedAt).toBeLessThan(300 + 250 + 5000);
      expect(reply.endedWrites).toBeGreaterThanOrEqual(1);
      wake();
      const error = await frozen.then(() => undefined, (err: unknown) => err);
      expect(isFencedError(error, 'GUARD_UNAVAILABLE')).toBe(true);
      expect(await rows(won.token)).toBe(0);
      finishOther();
      await otherWriting;
      expect(await rows(OTHER_LEASE_EFFECT)).toBe(1);
    });

    it("an election never ends a write of the live term: a standby's retries do not even queue behind it", async () => {
      const { a, b, guard } = setup({ graceMs: 50, timeoutMs: 1000 });
      const won = await a.acquire(10_000, 5000);
      if (!won.won) throw new Error('not granted');
      let finish!: () => void;
      let checked = false;
      const writing = guard.guardedWrite(won.token, async (connection) => {
        await insert(won.token)(connection);
        checked = true;
        await new Promise<void>((resolve) => (finish = resolve));
      });
      await waitFor(() => checked, 5000);
      for (let i = 0; i < 5; i++) expect((await b.acquire(10_000, 2000)).won).toBe(false);
      finish();
      await writing;
      expect(await rows(won.token)).toBe(1);
    });
  });
}
