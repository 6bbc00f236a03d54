/**
 * The MySQL lease store's adapter (mysql-lease-store.ts) where the conformance suite does not look:
 * what it records of an election, what a call that outlasts its timeout says, and that a listener
 * learns when the store is listening. (The grant and its takeover: mysql-grant-takeover.test.ts.)
 */
import { parseToken } from '@fenced/shared';
import { createMysqlGuard } from '@fenced/consumer-guard/mysql';
import { mysqlLeases } from '@fenced/coordinator/mysql';
import { createMysqlPool, createTestMysqlDatabase, waitFor } from '#test-support';
import type { PoolConnection } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';

let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;
let n = 0;

beforeAll(async () => {
  db = await createTestMysqlDatabase('my_lstore');
  await createMysqlGuard({ db: db.pool, resource: 'setup' }).migrate();
  await mysqlLeases({ pool: db.pool }).migrate();
});
afterAll(() => db?.drop());

const lease = () => `store-${++n}`;

/** A session of its own that holds `name`'s lease row locked (FOR UPDATE) until the test ends. */
async function holdLeaseRow(name: string): Promise<PoolConnection> {
  const connection = await db.pool.getConnection();
  onTestFinished(async () => {
    await connection.rollback().catch(() => undefined);
    connection.release();
  });
  await connection.beginTransaction();
  await connection.query('SELECT token FROM fenced_fences_leases WHERE name = ? FOR UPDATE', [name]);
  return connection;
}

/** What a call came to: its value, or its error. */
const settled = <T>(promise: Promise<T>): Promise<T | unknown> => promise.catch((err: unknown) => err);

describe('the MySQL lease store', () => {
  it('records each election: its token, node, TTL, the fences it advanced and whether it repaired the counter', async () => {
    const name = lease();
    const store = mysqlLeases({ pool: db.pool }).openLease(name, 'node-a', 15_000);
    const won = await store.acquire(10_000, 5000);
    if (!won.won) throw new Error('not granted');
    store.recordElection({ token: won.token, ttlMs: 10_000, fences: 2, regressed: true });
    const recorded = async () => {
      const [rows] = await db.pool.query('SELECT CAST(node AS CHAR) AS node, CAST(token AS CHAR) AS token, ttl_ms, fences, regressed FROM fenced_fences_elections WHERE lease = ?', [name]);
      return rows as Array<Record<string, unknown>>;
    };
    await waitFor(async () => (await recorded()).length > 0, 5000);
    expect((await recorded()).map((r) => ({ ...r, ttl_ms: Number(r['ttl_ms']), fences: Number(r['fences']), regressed: Number(r['regressed']) }))).toEqual([
      { node: 'node-a', token: won.token.toString(), ttl_ms: 10_000, fences: 2, regressed: 1 },
    ]);
  });

  it('names the operation that outlasted its timeout: renew, release, raise counter', async () => {
    const name = lease();
    const store = mysqlLeases({ pool: db.pool }).openLease(name, 'node-a', 15_000);
    const won = await store.acquire(60_000, 5000);
    if (!won.won) throw new Error('not granted');
    // The lease row locked by another session: every statement that writes it waits.
    await holdLeaseRow(name);
    const renew = await settled(store.renew(won.leaseValue, 60_000, () => 300));
    const release = await settled(store.release(won.leaseValue, 300));
    const raise = await settled(store.raiseCounter(parseToken(won.token + 10n), 300));
    for (const [error, operation] of [[renew, 'renew'], [release, 'release'], [raise, 'raise counter']] as const) {
      // Sent again after a deadlock within one budget: the time left is what the message counts.
      expect(error).toMatchObject({ name: 'TimeoutError', message: expect.stringMatching(new RegExp(`^${operation} timed out after \\d`)) });
    }
  });

  it('names the acquire that outlasted its timeout, waiting on a free lease’s row', async () => {
    const name = lease();
    // A grace period past the test: the grant does not end the session that holds the row.
    const store = mysqlLeases({ pool: db.pool, takeover: { graceMs: 60_000, timeoutMs: 60_000 } }).openLease(name, 'node-a', 15_000);
    const won = await store.acquire(60_000, 5000);
    if (!won.won) throw new Error('not granted');
    expect(await store.release(won.leaseValue, 5000)).toBe(true);
    await holdLeaseRow(name);
    // Its lock wait is whole seconds (at least 1 s): a call of 600 ms gives up first.
    const error = await settled(store.acquire(60_000, 600));
    expect(error).toMatchObject({ name: 'TimeoutError', message: 'acquire timed out after 600 ms' });
  });

  it('names the read of the server’s clock that outlasted its timeout', async () => {
    // A pool of one connection, held: the clock's read waits for it.
    const pool = createMysqlPool({ database: db.name, connectionLimit: 1 });
    onTestFinished(() => pool.end());
    const held = await pool.getConnection();
    onTestFinished(() => held.release());
    const store = mysqlLeases({ pool }).openLease(lease(), 'node-a', 15_000);
    // A lease value this store did not make owns nothing: the answer is the server's clock alone.
    const error = await settled(store.renew('not a lease value', 60_000, () => 300));
    expect(error).toMatchObject({ name: 'TimeoutError', message: expect.stringMatching(/^time timed out after \d/) });
  });

  it('tells a release listener when it is listening', async () => {
    const store = mysqlLeases({ pool: db.pool, pollMs: 50 }).openLease(lease(), 'node-a', 15_000);
    let listening = 0;
    const subscription = await store.listenForReleases(5000, () => undefined, () => undefined, () => void listening++);
    onTestFinished(() => subscription.close());
    await waitFor(() => listening > 0, 5000);
    expect(listening).toBeGreaterThan(0);
  });
});
