/**
 * The MySQL grant's takeover (mysql-grant.ts) at its edges: how long a grant waits on the term row an
 * expired term's frozen write holds, when it ends that write, and when it must not. The lease-checked
 * conformance suite states the common case (a frozen write ended after its grace period, a live
 * term's never queued behind); these state the bounds and the failures around it:
 * - the wait is the takeover budget, in whole seconds rounded up (InnoDB counts no finer), and then
 *   the grant answers not granted with nothing ended;
 * - nothing is ended before the grace period, however short InnoDB's lock-table refresh;
 * - nothing is ended while the lease has a live holder (another acquirer won meanwhile, and what
 *   blocks this grant may be the new term's own writes);
 * - a lock-table read that fails is tried again at the next look, not the end of the grant;
 * - a driver that does not report its session's id: the grant asks the server;
 * - concurrent first grants of a new lease, which InnoDB may deadlock on the lease's new rows: each
 *   is sent again, and every one is answered;
 * - a store that was never migrated: a typed error, at once.
 */
import { isFencedError, SchemaMissingError, type FencedEvent, type Token } from '@fenced/shared';
import { MYSQL_NOW_US_SQL } from '@fenced/shared/internal';
import { createMysqlGuard } from '@fenced/consumer-guard/mysql';
import { mysqlLeases, type MysqlLeasesOptions } from '@fenced/coordinator/mysql';
import { createMysqlPool, createTestMysqlDatabase, deadlockEvery, waitFor } from '#test-support';
import type { Pool, PoolConnection } from 'mysql2/promise';
import { failpoints } from '@fenced/shared/failpoints';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { acquireUntilWon, frozenWrite, type LeaseCheckedGuard } from '../lease-checked/conformance.js';

let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;
let n = 0;

beforeAll(async () => {
  db = await createTestMysqlDatabase('my_grant');
  await createMysqlGuard({ db: db.pool, resource: 'setup' }).migrate();
  await mysqlLeases({ pool: db.pool }).migrate();
  await db.pool.query('CREATE TABLE effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, token BIGINT NOT NULL) ENGINE = InnoDB');
});
afterAll(() => db?.drop());

const insert = (token: bigint) => (connection: never) => (connection as PoolConnection).query('INSERT INTO effects (token) VALUES (?)', [token.toString()]);

async function rows(token: bigint): Promise<number> {
  const [result] = await db.pool.query('SELECT COUNT(*) AS n FROM effects WHERE token = ?', [token.toString()]);
  return Number((result as Array<{ n: number }>)[0]!.n);
}

async function expired(lease: string): Promise<boolean> {
  const [result] = await db.pool.query(`SELECT 1 FROM fenced_fences_leases WHERE name = ? AND (holder IS NULL OR expires_us <= ${MYSQL_NOW_US_SQL})`, [lease]);
  return (result as unknown[]).length === 1;
}

/**
 * A lease of its own whose term `a` (granted for 300 ms) is frozen inside a lease-checked write and
 * has expired: the next grant waits on the term row that write holds. `b` is the store for the next
 * acquirer, on `pool` (the test's, or a wrapper of it) with `takeover`.
 */
async function frozenExpiredTerm(takeover: { graceMs: number; timeoutMs: number }, pool: MysqlLeasesOptions['pool'] = db.pool) {
  const lease = `grant-${++n}`;
  const events: FencedEvent[] = [];
  const guard = createMysqlGuard({ db: db.pool, resource: `res-${n}`, checkLease: lease, logger: (e) => events.push(e) }) as unknown as LeaseCheckedGuard;
  const a = mysqlLeases({ pool: db.pool }).openLease(lease, 'a', 15_000);
  const won = await a.acquire(300, 5000);
  if (!won.won) throw new Error('not granted');
  const frozen = await frozenWrite(guard, won.token, insert);
  await waitFor(() => expired(lease), 5000, 10);
  return { lease, token: won.token, frozen, b: mysqlLeases({ pool, takeover }).openLease(lease, 'b', 15_000) };
}

/** Wakes a frozen write and says how it ended: committed, or its error. */
async function outcomeOf(frozen: { write: Promise<unknown>; wake: () => void }): Promise<'committed' | unknown> {
  frozen.wake();
  return frozen.write.then(
    () => 'committed',
    (err: unknown) => err,
  );
}

/**
 * The test's pool as the store sees it, with `mysql2`'s parts the store uses: each connection handed
 * out hides its session id when `hideThreadId`, `failQuery` may fail a statement sent through the
 * pool (it is asked before each one), and the statements sent on a connection are told before they
 * are sent and once their reply arrived.
 */
function wrapped(
  pool: Pool,
  options: { hideThreadId?: boolean; failQuery?: (sql: string) => boolean; onConnectionQuery?: (sql: string) => void; onConnectionReply?: (sql: string) => void },
): MysqlLeasesOptions['pool'] {
  return {
    query: (sql: string, values?: unknown) => (options.failQuery?.(sql) === true ? Promise.reject(Object.assign(new Error('lock tables unreadable (planted by the test)'), { errno: 1227 })) : pool.query(sql, values as never[])) as Promise<[unknown, unknown]>,
    execute: pool.execute.bind(pool),
    getConnection: async () => {
      const connection = await pool.getConnection();
      const session = new Proxy(connection.connection, { get: (target, key) => (key === 'threadId' && options.hideThreadId === true ? undefined : Reflect.get(target, key)) });
      const query = (sql: string, values?: unknown) => {
        options.onConnectionQuery?.(sql);
        const reply = connection.query(sql, values as never[]);
        const heard = () => options.onConnectionReply?.(sql);
        reply.then(heard, heard);
        return reply;
      };
      return new Proxy(connection, { get: (target, key) => (key === 'connection' ? session : key === 'query' ? query : Reflect.get(target, key)) });
    },
  } as unknown as MysqlLeasesOptions['pool'];
}

describe('the MySQL grant behind an expired term’s frozen write', () => {
  it('waits the takeover budget, rounded up to whole seconds, ends nothing before its grace period, then answers not granted', async () => {
    // Grace far past the budget: the grant gives up first. A budget of 2.5 s waits 3 s.
    const { token, frozen, b } = await frozenExpiredTerm({ graceMs: 60_000, timeoutMs: 2500 });
    const sentAt = performance.now();
    const reply = await b.acquire(10_000, 15_000);
    const waitedMs = performance.now() - sentAt;
    expect(reply).toMatchObject({ won: false, holder: null, remainingMs: 0, endedWrites: 0 });
    // A lower bound only (a busy machine makes it longer): not 1 s, not 2 s.
    expect(waitedMs).toBeGreaterThanOrEqual(2900);
    // Nothing ended it: it commits when it wakes (its lease was checked while it held).
    expect(await outcomeOf(frozen)).toBe('committed');
    expect(await rows(token)).toBe(1);
  });

  it('waits at most half the call’s own timeout, so that its answer arrives before the call gives up', async () => {
    // A takeover budget far past the call's timeout: the call's half (3 s of 6 s) bounds the wait.
    const { frozen, b } = await frozenExpiredTerm({ graceMs: 60_000, timeoutMs: 30_000 });
    const reply = await b.acquire(10_000, 6000);
    expect(reply).toMatchObject({ won: false, holder: null, remainingMs: 0, endedWrites: 0 });
    expect(await outcomeOf(frozen)).toBe('committed');
  });

  it('ends the frozen write only once its grace period has passed, not at InnoDB’s lock-table refresh', async () => {
    const graceMs = 1500;
    const { token, frozen, b } = await frozenExpiredTerm({ graceMs, timeoutMs: 10_000 });
    const sentAt = performance.now();
    let reply = await b.acquire(10_000, 25_000);
    const firstReplyMs = performance.now() - sentAt;
    await waitFor(async () => reply.won || (reply = await b.acquire(10_000, 25_000)).won, 20_000, 20);
    expect(firstReplyMs).toBeGreaterThanOrEqual(graceMs - 50);
    const error = await outcomeOf(frozen);
    expect(isFencedError(error, 'GUARD_UNAVAILABLE')).toBe(true);
    expect(await rows(token)).toBe(0);
  });

  it('ends nothing while the lease has a live holder, even what blocks it', async () => {
    // Another acquirer won while this grant waited (its first look saw the lease expired): what blocks
    // the grant may then be the new term's own writes. The race is set up directly: the grant is
    // waiting on the frozen write's lock, and the lease row is then given a live holder, as the other
    // acquirer's grant would have. The first look for blockers comes a grace period after the call;
    // an attempt whose setup took longer than that proves nothing, and is run again.
    const graceMs = 2000;
    for (let attempt = 1; ; attempt++) {
      const { lease, token, frozen, b } = await frozenExpiredTerm({ graceMs, timeoutMs: 4000 });
      const sentAt = performance.now();
      const acquiring = b.acquire(10_000, 20_000);
      await waitFor(async () => {
        const [waiting] = await db.pool.query(`SELECT 1 FROM information_schema.PROCESSLIST WHERE DB = ? AND INFO LIKE '%lease_terms%FOR UPDATE%'`, [db.name]);
        return (waiting as unknown[]).length > 0;
      }, 10_000, 5);
      await db.pool.query(`UPDATE fenced_fences_leases SET holder = 'c', expires_us = ${MYSQL_NOW_US_SQL} + 60000000 WHERE name = ?`, [lease]);
      const setUpMs = performance.now() - sentAt;
      const reply = await acquiring;
      const outcome = await outcomeOf(frozen);
      if (setUpMs > graceMs * 0.75) {
        // Inconclusive: the first look may have come before the live holder did.
        if (attempt < 3) continue;
        throw new Error(`inconclusive: the live holder was set ${Math.round(setUpMs)} ms after the grant was sent, three times (grace ${graceMs} ms): the machine is too busy`);
      }
      expect(reply.endedWrites).toBe(0);
      expect(reply.won).toBe(false);
      expect(outcome).toBe('committed');
      expect(await rows(token as Token)).toBe(1);
      return;
    }
  });

  it('a lock-table read that fails is looked at again, and the frozen write is still ended', async () => {
    let failed = 0;
    // The first look's read fails (both the MariaDB and the MySQL 8 form of it); the next one works.
    const pool = wrapped(db.pool, { failQuery: (sql) => /INNODB_LOCK_WAITS|data_lock_waits/.test(sql) && failed++ < 2 });
    const { token, frozen, b } = await frozenExpiredTerm({ graceMs: 200, timeoutMs: 10_000 }, pool);
    await acquireUntilWon(b, 10_000, 15_000, 15_000);
    expect(failed).toBeGreaterThanOrEqual(2);
    expect(isFencedError(await outcomeOf(frozen), 'GUARD_UNAVAILABLE')).toBe(true);
    expect(await rows(token)).toBe(0);
  });

  it('sends no KILL once the grant settled, though its last look found a blocker', async () => {
    // The moment after a look found the frozen write: the write then commits (its lease was checked
    // while it held) and lets the grant through, whose reply arrives before the takeover goes on.
    let granted = false;
    // A pool of its own: the write's connection, back in the test's pool once it committed, must not
    // be the one a KILL of it is sent on.
    const own = createMysqlPool({ database: db.name, connectionLimit: 4 });
    onTestFinished(() => own.end());
    const pool = wrapped(own, { onConnectionReply: (sql) => void (sql.startsWith('CALL') && (granted = true)) });
    const { token, frozen, b } = await frozenExpiredTerm({ graceMs: 200, timeoutMs: 10_000 }, pool);
    let looks = 0;
    let outcome: Promise<unknown> | undefined;
    onTestFinished(() => failpoints.disarm());
    failpoints.arm(
      'takeover.blockers-found-before-end',
      {
        kind: 'call',
        run: async () => {
          if (looks++ > 0) return;
          outcome = outcomeOf(frozen);
          await outcome;
          await waitFor(() => granted, 10_000, 5);
        },
      },
      10,
    );
    const reply = await b.acquire(10_000, 15_000);
    expect(looks).toBe(1);
    expect(reply).toMatchObject({ won: true, endedWrites: 0 });
    expect(await outcome).toBe('committed');
    expect(await rows(token)).toBe(1);
  });

  it('a driver that reports its session id (mysql2 does): the grant sends one statement on its connection, the call', async () => {
    const sent: string[] = [];
    const { frozen, b } = await frozenExpiredTerm({ graceMs: 200, timeoutMs: 10_000 }, wrapped(db.pool, { onConnectionQuery: (sql) => sent.push(sql) }));
    await acquireUntilWon(b, 10_000, 15_000, 15_000);
    await outcomeOf(frozen);
    expect(sent.length).toBeGreaterThanOrEqual(1);
    expect(sent.filter((sql) => !sql.startsWith('CALL '))).toEqual([]);
  });

  it('a driver that does not report its session id: the grant asks the server, and ends the frozen write as it would', async () => {
    const sent: string[] = [];
    const { token, frozen, b } = await frozenExpiredTerm({ graceMs: 200, timeoutMs: 10_000 }, wrapped(db.pool, { hideThreadId: true, onConnectionQuery: (sql) => sent.push(sql) }));
    const reply = await acquireUntilWon(b, 10_000, 15_000, 15_000);
    expect(reply.won && reply.endedWrites).toBeGreaterThanOrEqual(1);
    expect(isFencedError(await outcomeOf(frozen), 'GUARD_UNAVAILABLE')).toBe(true);
    expect(await rows(token)).toBe(0);
    expect(sent.filter((sql) => /CONNECTION_ID\(\)/.test(sql)).length).toBeGreaterThanOrEqual(1);
  });
});

describe('concurrent first grants of new leases', () => {
  it('are each answered, one granted per lease, though InnoDB deadlocks some of them on the new rows', async () => {
    // Measured here with the grant's retry taken out: 2 of 120 such grants failed with ER_LOCK_DEADLOCK
    // (four acquirers on each of 30 new leases), and each of six runs of this test failed, with tens
    // of deadlocks among its 4,000 grants (a second on this machine). With the retry: none.
    const rounds = 1000;
    const failures: string[] = [];
    let granted = 0;
    for (let round = 0; round < rounds; round++) {
      const lease = `first-${++n}`;
      const stores = ['a', 'b', 'c', 'd'].map((node) => mysqlLeases({ pool: db.pool }).openLease(lease, node, 15_000));
      for (const reply of await Promise.allSettled(stores.map((store) => store.acquire(10_000, 10_000)))) {
        if (reply.status === 'rejected') failures.push(String(reply.reason));
        else if (reply.value.won) granted++;
      }
    }
    expect(failures).toEqual([]);
    expect(granted).toBe(rounds);
  });
});

describe('a grant that InnoDB deadlocks every time', () => {
  it('is sent three times in all, then fails with the deadlock', async () => {
    const lease = `deadlocked-${++n}`;
    // The server refuses every grant of this lease with InnoDB's deadlock error, counting each.
    const deadlocks = await deadlockEvery(db.pool, { table: 'fenced_fences_leases', event: 'UPDATE', column: 'name', value: lease });
    try {
      const store = mysqlLeases({ pool: db.pool }).openLease(lease, 'a', 15_000);
      const error = await store.acquire(10_000, 10_000).catch((err: unknown) => err);
      expect(error).toMatchObject({ errno: 1213 });
      expect(await deadlocks.attempts()).toBe(3);
    } finally {
      await deadlocks.drop();
    }
  });
});

describe('the MySQL grant on a database never migrated', () => {
  it('fails at once with SCHEMA_MISSING, naming the installation', async () => {
    const store = mysqlLeases({ pool: db.pool, table: 'never_migrated' }).openLease('grant-unmigrated', 'a', 15_000);
    const error = await store.acquire(1000, 5000).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(SchemaMissingError);
    expect(String((error as Error).message)).toMatch(/never_migrated/);
  });
});
