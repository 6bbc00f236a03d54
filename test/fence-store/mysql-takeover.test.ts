/**
 * The election-time advance's takeover on MySQL/MariaDB (mysql-takeover.ts) where the conformance
 * suite does not look: whom it may not end (a session of another user, a lock whose holder's token
 * cannot be read), a wait that is not on a row lock, the advance's own lock-wait bound, set for its
 * statement and put back on the pooled connection after, how often it reads the lock tables, and a
 * blocker gone before its KILL, or a KILL that fails otherwise, and a refused advance rolled back.
 * (Written for StrykerJS's survivors.)
 */
import { createMysqlGuard } from '@fenced/consumer-guard/mysql';
import { startFaultProxy } from '@fenced/chaos';
import type { FencedEvent } from '@fenced/shared';
import { failpoints } from '@fenced/shared/failpoints';
import { createMysqlPool, createTestMysqlDatabase, testMysqlUrl, waitFor } from '#test-support';
import { Kysely, MysqlDialect } from 'kysely';
import { randomBytes } from 'node:crypto';
import mysqlCallbacks from 'mysql2';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';

let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;
let n = 0;
const resource = () => `takeover-${++n}`;

beforeAll(async () => {
  db = await createTestMysqlDatabase('takeover');
  await createMysqlGuard({ db: db.pool, resource: 'setup' }).migrate();
});
afterAll(() => db?.drop());

/** A connection of its own, in a transaction, ended with the test. */
async function heldSession(): Promise<mysql.PoolConnection> {
  const connection = await db.pool.getConnection();
  onTestFinished(async () => {
    await connection.query('ROLLBACK').catch(() => undefined);
    connection.release();
  });
  await connection.query('START TRANSACTION');
  return connection;
}

/**
 * A session of its own holding `name`'s fence row locked (a locking read, in a transaction) until
 * it commits or the test ends; where the row does not exist yet, the gap where it would be.
 */
async function lockFenceRow(name: string): Promise<mysql.PoolConnection> {
  const session = await heldSession();
  await session.query('SELECT * FROM fenced_fences WHERE resource = ? FOR UPDATE', [name]);
  return session;
}

/** Every takeover event a guard's logger heard. */
function takeoversHeard(): { logger: (event: FencedEvent) => void; takeovers: FencedEvent[] } {
  const takeovers: FencedEvent[] = [];
  return { logger: (event) => void (event.type === 'guard.takeover' && takeovers.push(event)), takeovers };
}

/**
 * Resolves once some statement on the fences has waited 100 ms (a lock wait on loopback), and
 * `windowMs` more after that: a claim that something does not happen while the advance waits
 * needs a window.
 */
async function whileAnAdvanceWaits(windowMs: number): Promise<void> {
  await waitFor(async () => {
    const [rows] = await db.pool.query(`SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND = 'Query' AND INFO LIKE '%fenced_fences%' AND TIME_MS > 100`, [db.name]);
    return Number((rows as Array<{ n: number }>)[0]!.n) >= 1;
  }, 20_000);
  const since = performance.now();
  await waitFor(() => performance.now() - since > windowMs, windowMs + 5000);
}

describe('the takeover of an election-time advance on MySQL', () => {
  it('never ends a session whose token it cannot read: a lock on a fence row that does not exist yet', async () => {
    const name = resource();
    const { logger, takeovers } = takeoversHeard();
    const guard = createMysqlGuard({ db: db.pool, resource: name, takeover: { graceMs: 50, timeoutMs: 10_000 }, logger });
    // An operator's locking read of a resource with no fence row: a gap lock the advance's insert waits for.
    const operator = await lockFenceRow(name);
    const advance = guard.advance(4n).then(() => 'advanced', (err: unknown) => err);
    // Ten grace periods, each a chance to end the operator's session.
    await whileAnAdvanceWaits(500);
    await operator.query('COMMIT');
    expect(await advance).toBe('advanced');
    expect(takeovers).toEqual([]);
    expect(await guard.highest()).toBe(4n);
  });

  it('a wait that is not on a row lock (a table locked whole) finds no blocker and reports none', async () => {
    const name = resource();
    const { logger, takeovers } = takeoversHeard();
    const guard = createMysqlGuard({ db: db.pool, resource: name, takeover: { graceMs: 50, timeoutMs: 10_000 }, logger });
    const operator = await db.pool.getConnection();
    onTestFinished(async () => {
      await operator.query('UNLOCK TABLES').catch(() => undefined);
      operator.release();
    });
    await operator.query('LOCK TABLES fenced_fences WRITE');
    const advance = guard.advance(4n).then(() => 'advanced', (err: unknown) => err);
    await whileAnAdvanceWaits(500);
    await operator.query('UNLOCK TABLES');
    expect(await advance).toBe('advanced');
    expect(takeovers).toEqual([]);
  });

  it('bounds the advance’s lock wait by its timeout in whole seconds, then puts the session’s own bound back', async () => {
    const name = resource();
    // One connection, the advance's, with a lock-wait bound of the application's own.
    const pool = createMysqlPool({ database: db.name, connectionLimit: 1 });
    onTestFinished(() => pool.end());
    await pool.query('SET SESSION innodb_lock_wait_timeout = 7');
    const guard = createMysqlGuard({ db: pool, resource: name, takeover: { graceMs: 60_000, timeoutMs: 2500 } });
    await guard.advance(5n);
    // Another session holds the row past the advance's bound (a grace period longer than the bound:
    // nobody is ended), so the advance waits its bound out.
    await lockFenceRow(name);
    const started = performance.now();
    const failed = await guard.advance(6n).then(() => 'advanced', (err: unknown) => err);
    const waited = performance.now() - started;
    expect(failed).toMatchObject({ code: 'GUARD_UNAVAILABLE' });
    // innodb_lock_wait_timeout counts whole seconds: 2500 ms is 3 s, never fewer (a busy machine
    // only makes the wait longer).
    expect(waited).toBeGreaterThanOrEqual(2900);
    const [rows] = await pool.query('SELECT @@SESSION.innodb_lock_wait_timeout AS s');
    expect((rows as Array<{ s: number }>)[0]!.s).toBe(7);
    expect(failed).toMatchObject({ message: expect.stringMatching(/advance/) });
  });

  it('a refused advance (its fence already there) is rolled back: its pooled connection keeps no transaction and no lock', async () => {
    const name = resource();
    // One connection, the advance's, so the pool hands the same one back.
    const pool = createMysqlPool({ database: db.name, connectionLimit: 1 });
    onTestFinished(() => pool.end());
    const guard = createMysqlGuard({ db: pool, resource: name, takeover: { graceMs: 50, timeoutMs: 10_000 } });
    await guard.advance(5n);
    expect(await guard.advance(5n).then(() => 'advanced', (err: unknown) => err)).toMatchObject({ code: 'FENCE_AHEAD' });
    const [open] = await pool.query('SELECT @@in_transaction AS open');
    expect((open as Array<{ open: number }>)[0]!.open).toBe(0);
    // Nobody holds the fence row: a locking read that may not wait gets it at once.
    const other = await heldSession();
    await other.query('SELECT * FROM fenced_fences WHERE resource = ? FOR UPDATE NOWAIT', [name]);
  });

  it('an advance without a takeover waits for the lock as long as the server allows, and leaves the session’s own bound as it was', async () => {
    const name = resource();
    // One connection with a lock-wait bound of the application's own (not the server's default).
    const pool = createMysqlPool({ database: db.name, connectionLimit: 1 });
    onTestFinished(() => pool.end());
    await pool.query('SET SESSION innodb_lock_wait_timeout = 7');
    const guard = createMysqlGuard({ db: pool, resource: name, takeover: false });
    await guard.advance(5n);
    const writer = await lockFenceRow(name);
    const advance = guard.advance(6n).then(() => 'advanced', (err: unknown) => err);
    // Past a second of waiting (the shortest bound a lock wait can have), the lock is let go.
    await whileAnAdvanceWaits(2500);
    await writer.query('COMMIT');
    expect(await advance).toBe('advanced');
    const [rows] = await pool.query('SELECT @@SESSION.innodb_lock_wait_timeout AS s');
    expect((rows as Array<{ s: number }>)[0]!.s).toBe(7);
  });

  it('a blocker of a lower token that this user may not end is reported once, not ended, and the advance gives up at its bound', async () => {
    const name = resource();
    const user = `fenced_nokill_${randomBytes(3).toString('hex')}`;
    await db.pool.query(`CREATE USER '${user}'@'%'`);
    onTestFinished(async () => void (await db.pool.query(`DROP USER IF EXISTS '${user}'@'%'`)));
    // Reading the lock tables takes PROCESS; ending another user's session would take CONNECTION ADMIN.
    await db.pool.query(`GRANT ALL ON \`${db.name}\`.* TO '${user}'@'%'`);
    await db.pool.query(`GRANT PROCESS ON *.* TO '${user}'@'%'`);
    const url = new URL(testMysqlUrl());
    url.username = user;
    url.password = '';
    url.pathname = `/${db.name}`;
    const limited = mysql.createPool({ uri: url.toString(), connectionLimit: 2 });
    onTestFinished(() => limited.end());

    const { logger, takeovers } = takeoversHeard();
    await createMysqlGuard({ db: db.pool, resource: name }).advance(3n);
    // The old term's writer (another user) frozen inside its guarded transaction, the fence row locked.
    const writer = await lockFenceRow(name);
    const guard = createMysqlGuard({ db: limited, resource: name, takeover: { graceMs: 50, timeoutMs: 2000 }, logger });
    const failed = await guard.advance(4n).then(() => 'advanced', (err: unknown) => err);
    expect(failed).toMatchObject({ code: 'GUARD_UNAVAILABLE' });
    // One report: the bound is on the wait in all, so a lock wait that timed out is not run again
    // (it was, maxRetries times, each reporting the blocker anew: the election failed after six
    // times its bound).
    const [[writerId]] = (await writer.query('SELECT CONNECTION_ID() AS id')) as unknown as [[{ id: number }]];
    expect(takeovers).toEqual([{ type: 'guard.takeover', resource: name, token: 4n, blockingToken: 3n, session: String(writerId.id), ended: false }]);
  });

  it('reads InnoDB’s lock tables at most every 150 ms, however short the grace period: a faster reader keeps their cache from ever refreshing', async () => {
    const name = resource();
    // The guard over Kysely, whose log hears every statement the takeover sends.
    const url = new URL(testMysqlUrl());
    url.pathname = `/${db.name}`;
    const pool = mysqlCallbacks.createPool({ uri: url.toString(), connectionLimit: 4 });
    const lockReads: number[] = [];
    const kysely = new Kysely<unknown>({
      dialect: new MysqlDialect({ pool }),
      log: (event) => void (/INNODB_TRX/.test(event.query.sql) && lockReads.push(performance.now())),
    });
    onTestFinished(() => kysely.destroy());
    const guard = createMysqlGuard({ db: kysely, pool, resource: name, takeover: { graceMs: 0, timeoutMs: 10_000 } });
    // A gap lock: its holder's token cannot be read, so it is never ended and the takeover keeps looking.
    const operator = await lockFenceRow(name);
    const advance = guard.advance(4n).then(() => 'advanced', (err: unknown) => err);
    await whileAnAdvanceWaits(1000);
    await operator.query('COMMIT');
    expect(await advance).toBe('advanced');
    expect(lockReads.length).toBeGreaterThan(1);
    // Each read is logged when it completes; the next starts 150 ms after that at the earliest.
    const gaps = lockReads.slice(1).map((at, i) => at - lockReads[i]!);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(150);
  });

  it('a blocker that ended between the search and its KILL is passed over, and the others are ended in the same turn', async () => {
    const name = resource();
    const { logger, takeovers } = takeoversHeard();
    await createMysqlGuard({ db: db.pool, resource: name }).advance(3n);
    // Two writers of the old term holding the fence row shared (a write of the fence's own token
    // does so): the advance waits for both.
    const sharers = await Promise.all(
      [0, 1].map(async () => {
        const connection = await db.pool.getConnection();
        onTestFinished(() => connection.destroy());
        await connection.query('START TRANSACTION');
        await connection.query('SELECT * FROM fenced_fences WHERE resource = ? LOCK IN SHARE MODE', [name]);
        const [[row]] = (await connection.query('SELECT CONNECTION_ID() AS id')) as unknown as [[{ id: number }]];
        return row.id;
      }),
    );
    const [gone, frozen] = sharers as [number, number];
    // The moment after the search found both: one of them ends on its own (the test ends it).
    let turns = 0;
    onTestFinished(() => failpoints.disarm());
    failpoints.arm(
      'takeover.blockers-found-before-end',
      {
        kind: 'call',
        run: async () => {
          if (turns++ === 0) await db.pool.query(`KILL CONNECTION ${gone}`);
        },
      },
      10,
    );
    const guard = createMysqlGuard({ db: db.pool, resource: name, takeover: { graceMs: 50, timeoutMs: 10_000 }, logger });
    expect(await guard.advance(4n).then(() => 'advanced', (err: unknown) => err)).toBe('advanced');
    // One turn: the KILL of the session already gone failed, and the other was ended all the same.
    expect(turns).toBe(1);
    expect(takeovers).toEqual([{ type: 'guard.takeover', resource: name, token: 4n, blockingToken: 3n, session: String(frozen), ended: true }]);
  });

  it('a KILL that fails for a reason other than a denial (its connection lost) gives the turn up: nobody is reported as a blocker not ended', async () => {
    const name = resource();
    const { logger, takeovers } = takeoversHeard();
    await createMysqlGuard({ db: db.pool, resource: name }).advance(3n);
    // The old term's writer frozen inside its guarded transaction, the fence row locked.
    const writer = await lockFenceRow(name);
    // The guard reaches the server through a proxy that the test cuts in the moment after the
    // search found the writer: the KILL then fails as a lost connection, not as a denial.
    const server = new URL(testMysqlUrl());
    const proxy = await startFaultProxy(Number(server.port || 3306));
    onTestFinished(() => proxy.close());
    server.port = String(proxy.port);
    server.pathname = `/${db.name}`;
    const proxied = mysql.createPool({ uri: server.toString(), connectionLimit: 4 });
    onTestFinished(() => proxied.end().catch(() => undefined));
    onTestFinished(() => failpoints.disarm());
    failpoints.arm('takeover.blockers-found-before-end', { kind: 'call', run: () => proxy.setMode({ kind: 'cut' }) });
    const guard = createMysqlGuard({ db: proxied, resource: name, takeover: { graceMs: 50, timeoutMs: 5000 }, logger });
    const outcome = await guard.advance(4n).then(() => 'advanced', (err: unknown) => err);
    expect(outcome).toMatchObject({ code: 'GUARD_UNAVAILABLE' });
    expect(takeovers).toEqual([]);
    // Nothing ended the writer: its session still answers.
    await expect(writer.query('SELECT 1')).resolves.toBeDefined();
  });
});
