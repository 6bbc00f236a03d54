/**
 * A SQL lease store's adapter (mysql-lease-store.ts, postgres-lease-store.ts) where the conformance
 * suite does not look, asked of both the same way: what it records of an election, what a call that
 * outlasts its timeout says, and that a listener learns when the store is listening. (Written for
 * StrykerJS's survivors on each adapter.)
 */
import type { LeaseBackend } from '@fenced/coordinator';
import { parseToken } from '@fenced/shared';
import { waitFor } from '#test-support';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';

type LeaseStore = ReturnType<LeaseBackend['openLease']>;

export interface SqlLeaseStoreHarness {
  /** 'MySQL' or 'PostgreSQL', for the test names. */
  readonly database: string;
  /** Before the first test: a database of its own, migrated. */
  setup(): Promise<void>;
  /** After the last: that database dropped. */
  teardown(): Promise<void>;
  /** `lease` for node-a, with `takeover` when given, and releases polled every 50 ms. */
  openLease(lease: string, takeover?: { graceMs: number; timeoutMs: number }): LeaseStore;
  /** `lease` on a pool of one connection, that connection checked out and held until the test ends. */
  openLeaseOnHeldPool(lease: string): Promise<LeaseStore>;
  /** A session of its own that holds `lease`'s row locked (FOR UPDATE) until the test ends. */
  holdLeaseRow(lease: string): Promise<void>;
  /**
   * What an acquire of a free lease whose row another session holds comes to within a call of 600 ms:
   * MySQL's lock wait is whole seconds, so the call gives up first; PostgreSQL's server gives up at
   * half the call's time and answers not granted.
   */
  readonly acquireOnHeldRow: 'times out' | 'not granted';
  /** The election record of `lease`, one entry per election. */
  elections(lease: string): Promise<Array<{ node: string; token: string; ttlMs: number; fences: number; regressed: boolean }>>;
}

/** What a call came to: its value, or its error. */
const settled = <T>(promise: Promise<T>): Promise<T | unknown> => promise.catch((err: unknown) => err);

export function describeSqlLeaseStoreAdapter(harness: SqlLeaseStoreHarness): void {
  let n = 0;
  const lease = () => `adapter-${++n}`;

  describe(`the ${harness.database} lease store's adapter`, () => {
    beforeAll(() => harness.setup());
    afterAll(() => harness.teardown());

    it('records each election: its token, node, TTL, the fences it advanced and whether it repaired the counter', async () => {
      const name = lease();
      const store = harness.openLease(name);
      const won = await store.acquire(10_000, 5000);
      if (!won.won) throw new Error('not granted');
      store.recordElection({ token: won.token, ttlMs: 10_000, fences: 2, regressed: true });
      await waitFor(async () => (await harness.elections(name)).length > 0, 5000);
      expect(await harness.elections(name)).toEqual([{ node: 'node-a', token: won.token.toString(), ttlMs: 10_000, fences: 2, regressed: true }]);
    });

    it('names the operation that outlasted its timeout: renew, release, raise counter', async () => {
      const name = lease();
      const store = harness.openLease(name);
      const won = await store.acquire(60_000, 5000);
      if (!won.won) throw new Error('not granted');
      // The lease row locked by another session: every statement that writes it waits.
      await harness.holdLeaseRow(name);
      const renew = await settled(store.renew(won.leaseValue, 60_000, () => 300));
      const release = await settled(store.release(won.leaseValue, 300));
      const raise = await settled(store.raiseCounter(parseToken(won.token + 10n), 300));
      for (const [error, operation] of [[renew, 'renew'], [release, 'release'], [raise, 'raise counter']] as const) {
        // MySQL sends a deadlocked statement again within one budget: the time left is what the message counts.
        expect(error).toMatchObject({ name: 'TimeoutError', message: expect.stringMatching(new RegExp(`^${operation} timed out after \\d`)) });
      }
    });

    it(`an acquire waiting on a free lease's row held by another session ${harness.acquireOnHeldRow === 'times out' ? 'names itself when it outlasts its timeout' : 'answers not granted within its timeout'}`, async () => {
      const name = lease();
      // A grace period past the test: the grant does not end the session that holds the row.
      const store = harness.openLease(name, { graceMs: 60_000, timeoutMs: 60_000 });
      const won = await store.acquire(60_000, 5000);
      if (!won.won) throw new Error('not granted');
      expect(await store.release(won.leaseValue, 5000)).toBe(true);
      await harness.holdLeaseRow(name);
      const reply = await settled(store.acquire(60_000, 600));
      if (harness.acquireOnHeldRow === 'times out') expect(reply).toMatchObject({ name: 'TimeoutError', message: 'acquire timed out after 600 ms' });
      else expect(reply).toMatchObject({ won: false, holder: null, endedWrites: 0 });
    });

    it('names the read of the server’s clock, and the acquire, that outlasted their timeout waiting for a connection', async () => {
      const store = await harness.openLeaseOnHeldPool(lease());
      // A lease value this store did not make owns nothing: the answer is the server's clock alone.
      const error = await settled(store.renew('not a lease value', 60_000, () => 300));
      expect(error).toMatchObject({ name: 'TimeoutError', message: expect.stringMatching(/^time timed out after \d/) });
      expect(await settled(store.acquire(60_000, 300))).toMatchObject({ name: 'TimeoutError', message: 'acquire timed out after 300 ms' });
    });

    it('tells a release listener when it is listening', async () => {
      const store = harness.openLease(lease());
      let listening = 0;
      const subscription = await store.listenForReleases(5000, () => undefined, () => undefined, () => void listening++);
      onTestFinished(() => subscription.close());
      await waitFor(() => listening > 0, 5000);
      expect(listening).toBeGreaterThan(0);
    });
  });
}
