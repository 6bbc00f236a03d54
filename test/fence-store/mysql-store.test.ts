/**
 * The MySQL fence store's own promises (written for StrykerJS's survivors on mysql-store.ts): those
 * both SQL stores keep (sql-store-promises.ts); and its own: the shared path a write of the fence's
 * own token takes, first advances that meet, a write retried after a lock wait, a killed session's
 * error heard and reported, and an outcome a pool answers as bytes.
 */
import { createMysqlGuard } from '@fenced/consumer-guard/mysql';
import { mysqlLeases } from '@fenced/coordinator/mysql';
import { startMariadbServer } from '@fenced/chaos';
import { caught, createMysqlPool, createTestMysqlDatabase, deadlockEvery, testMysqlUrl, waitFor } from '#test-support';
import { isFencedError, parseToken, type FencedEvent, type FencedLogger } from '@fenced/shared';
import { Kysely, MysqlDialect } from 'kysely';
import mysqlCallbacks from 'mysql2';
import { createPool, type PoolConnection } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { describeSqlStorePromises, type CallerTransaction, type SqlStoreGuard } from './sql-store-promises.js';

let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;
/** A database where nothing was migrated: every statement of the store fails as "not migrated". */
let bare: Awaited<ReturnType<typeof createTestMysqlDatabase>>;

beforeAll(async () => {
  db = await createTestMysqlDatabase('mystore');
  bare = await createTestMysqlDatabase('mystore_bare');
  await createMysqlGuard({ db: db.pool, resource: 'setup' }).migrate();
  await mysqlLeases({ pool: db.pool }).migrate();
});
afterAll(async () => {
  await db.drop();
  await bare.drop();
});

const on = (migrated: boolean) => (migrated ? db : bare);

/** A transaction the test holds on its own connection, as a caller's executor. */
async function begin(migrated: boolean): Promise<CallerTransaction> {
  const connection = await on(migrated).pool.getConnection();
  await connection.beginTransaction();
  const sent: Array<{ text: string; values: unknown[] | undefined }> = [];
  return {
    tx: {
      executeSql: async (text: string, values?: unknown[]) => {
        sent.push({ text, values });
        const [rows] = await connection.query(text, values);
        return { rows: Array.isArray(rows) ? rows : [] };
      },
    },
    sent,
    async end(how) {
      try {
        await (how === 'commit' ? connection.commit() : connection.rollback());
      } finally {
        connection.release();
      }
    },
  };
}

const ownErrno = { 'lease not held': 45004, 'duplicate fire': 45003 } as const;

/** A guard on a mysql2 pool whose server nothing listens for (port 1); `close` ends the pool. */
function unreachable(resource: string, logger: FencedLogger): { guard: ReturnType<typeof createMysqlGuard>; close: () => Promise<void> } {
  const pool = createPool({ host: '127.0.0.1', port: 1, user: 'root', connectTimeout: 2000 });
  return { guard: createMysqlGuard({ db: pool, resource, logger }), close: () => pool.end() };
}

describeSqlStorePromises('mysql', {
  database: 'MySQL',
  component: 'mysql fences',
  guard: (resource, { migrated, checkLease, logger }) =>
    createMysqlGuard({ db: on(migrated).pool, resource, ...(checkLease === undefined ? {} : { checkLease }), ...(logger === undefined ? {} : { logger }) }) as unknown as SqlStoreGuard,
  begin,
  pool: () => bare.pool,
  raiseOwn: (connection, refusal) => (connection as PoolConnection).query(`SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = ${ownErrno[refusal]}, MESSAGE_TEXT = '9'`),
  ownCode: (refusal) => ({ errno: ownErrno[refusal], sqlMessage: '9' }),
  openLease: (lease) => mysqlLeases({ pool: db.pool }).openLease(lease, 'node-a', 15_000),
  unreachable,
  refusedConfigurations: [
    {
      make: () => createMysqlGuard({ db: new Kysely({ dialect: new MysqlDialect({ pool: mysqlCallbacks.createPool({ uri: testMysqlUrl(), connectionLimit: 1 }) }) }), resource: 'r' } as never),
      path: 'pool',
      message: /^required when db is a Kysely instance: pass the mysql2 pool given to its MysqlDialect/,
    },
    { make: () => createMysqlGuard({ db: { query: 1 }, resource: 'r' } as never), path: 'db', message: /^must be a mysql2 promise pool/ },
  ],
});

describe('the MySQL fence store, its session killed', () => {
  it("hears the killed session's error while the write holds it, reports the loss with its resource, and fails the write typed", async () => {
    const events: FencedEvent[] = [];
    const guard = createMysqlGuard({ db: db.pool, resource: 'mystore-killed', logger: (e) => void events.push(e) });
    const err = await caught(
      guard.guardedWrite(1n, async (connection) => {
        const [rows] = await (connection as PoolConnection).query('SELECT CONNECTION_ID() AS id');
        await db.pool.query(`KILL CONNECTION ${Number((rows as Array<{ id: number }>)[0]!.id)}`);
        await waitFor(() => events.some((e) => e.type === 'guard.connection-lost'), 10_000);
      }),
    );
    expect(isFencedError(err, 'GUARD_UNAVAILABLE'), String(err)).toBe(true);
    const lost = events.find((e) => e.type === 'guard.connection-lost');
    expect(lost).toMatchObject({ type: 'guard.connection-lost', resource: 'mystore-killed', error: expect.any(Error) });
    expect(await guard.highest()).toBeNull();
  });
});

let r = 0;
const nextResource = () => `mystore-${++r}`;

describe('the MySQL fence store, a write of the fence’s own token (the shared path)', () => {
  it('writes again and again at the fence it saw, claims each fire once, and refuses a fire claimed before', async () => {
    const guard = createMysqlGuard({ db: db.pool, resource: nextResource() });
    await guard.guardedWrite(5n, async () => 'first');
    // The guard has seen the fence at 5: these take the shared path.
    expect(await guard.guardedWrite(5n, async () => 'again')).toBe('again');
    expect(await guard.guardedWrite(5n, async () => 'and again')).toBe('and again');
    expect(await guard.guardedWrite(5n, async () => 'a fire', { fireId: 'shared-fire-1' })).toBe('a fire');
    expect(await caught(guard.guardedWrite(5n, async () => 'never', { fireId: 'shared-fire-1' }))).toMatchObject({ name: 'DuplicateFireError' });
    expect(await caught(guard.guardedWrite(4n, async () => 'never'))).toMatchObject({ name: 'StaleTokenError' });
    expect(await guard.highest()).toBe(5n);
  });

  it('holds the fence row shared: two writes of the term run inside their transactions at once', async () => {
    const resource = nextResource();
    const guard = createMysqlGuard({ db: db.pool, resource });
    await guard.guardedWrite(3n, async () => 'seen');
    let inside = 0;
    const both = () =>
      guard.guardedWrite(3n, async () => {
        inside++;
        // Each waits for the other inside its transaction: with the row taken exclusively, the second
        // would wait for the first to commit, and neither would get here.
        await waitFor(() => inside === 2, 10_000);
      });
    await Promise.all([both(), both()]);
    expect(inside).toBe(2);
  });

  it("finds the fence row gone (deleted by hand after the guard saw it) and writes it again", async () => {
    const resource = nextResource();
    const guard = createMysqlGuard({ db: db.pool, resource });
    await guard.guardedWrite(8n, async () => 'seen');
    await db.pool.query('DELETE FROM fenced_fences WHERE resource = ?', [resource]);
    expect(await guard.guardedWrite(8n, async () => 'again')).toBe('again');
    expect(await guard.highest()).toBe(8n);
  });
});

describe('the MySQL fence store, first advances that meet', () => {
  it.each(['REPEATABLE READ', 'READ COMMITTED'])('under %s: each advance of a new resource is applied or refused as ahead, never a failure', async (isolation) => {
    // Two first advances meet on a missing row: a deadlock under REPEATABLE READ, a duplicate key
    // under READ COMMITTED (a server whose sessions default to it); the store runs the advance again.
    const pool = createMysqlPool({ database: db.name, connectionLimit: 8 });
    onTestFinished(() => pool.end());
    pool.pool.on('connection', (connection) => connection.query(`SET SESSION TRANSACTION ISOLATION LEVEL ${isolation}`));
    const guards = [1, 2, 3, 4].map(() => createMysqlGuard({ db: pool, resource: 'setup', maxRetries: 100 }));
    const resources = Array.from({ length: 40 }, () => nextResource());
    const outcomes = await Promise.all(
      resources.flatMap((resource) => guards.map((guard, i) => guard.fence(resource).advance(parseToken(i + 1)).then(() => 'advanced', (err: unknown) => (err as Error).name))),
    );
    expect(outcomes.filter((o) => o !== 'advanced' && o !== 'FenceAheadError')).toEqual([]);
    for (const resource of resources) expect(await guards[0]!.fence(resource).highest()).toBe(4n);
  });
});

describe('the MySQL fence store, a write that waited too long for a lock', () => {
  it('runs the write again, and says so (guard.retry with the error number and the attempt)', async () => {
    // One connection, so the session's lock wait of a second is the write's own.
    const pool = createMysqlPool({ database: db.name, connectionLimit: 1 });
    onTestFinished(() => pool.end());
    await db.pool.query('CREATE TABLE IF NOT EXISTS locked_rows (id INT PRIMARY KEY) ENGINE = InnoDB');
    await db.pool.query('INSERT IGNORE INTO locked_rows (id) VALUES (1)');
    const holder = await db.pool.getConnection();
    onTestFinished(async () => {
      await holder.rollback().catch(() => undefined);
      holder.release();
    });
    await holder.beginTransaction();
    await holder.query('SELECT id FROM locked_rows WHERE id = 1 FOR UPDATE');
    const events: FencedEvent[] = [];
    const resource = nextResource();
    const guard = createMysqlGuard({ db: pool, resource, logger: (e) => void events.push(e) });
    const attempts: number[] = [];
    const written = guard.guardedWrite(2n, async (connection, ctx) => {
      attempts.push(ctx.attempt);
      await (connection as PoolConnection).query('SET SESSION innodb_lock_wait_timeout = 1');
      await (connection as PoolConnection).query('SELECT id FROM locked_rows WHERE id = 1 FOR UPDATE');
      return ctx.attempt;
    });
    await waitFor(() => events.some((e) => e.type === 'guard.retry'), 20_000);
    await holder.rollback();
    expect(await written).toBe(2);
    expect(attempts).toEqual([1, 2]);
    expect(events.filter((e) => e.type === 'guard.retry')).toEqual([{ type: 'guard.retry', resource, token: 2n, sqlstate: '1205', attempt: 1 }]);
  });
});

describe("the MySQL fence store inside the caller's transaction, its session killed", () => {
  it('fails typed when the session ends while the guard proves the transaction open, not as a transaction never begun', async () => {
    const guard = createMysqlGuard({ db: db.pool, resource: nextResource() });
    const connection = await db.pool.getConnection();
    const [rows] = await connection.query('SELECT CONNECTION_ID() AS id');
    const id = Number((rows as Array<{ id: number }>)[0]!.id);
    await connection.beginTransaction();
    // The caller's executor: its session is killed just before the guard goes back to its savepoint.
    const tx = {
      executeSql: async (text: string, values?: unknown[]) => {
        if (text.startsWith('ROLLBACK TO SAVEPOINT')) await db.pool.query(`KILL CONNECTION ${id}`);
        const [result] = await connection.query(text, values);
        return { rows: Array.isArray(result) ? result : [] };
      },
    };
    const err = await caught(guard.guardedWriteIn(tx, 1n, async () => 'never'));
    connection.destroy();
    expect(isFencedError(err, 'GUARD_UNAVAILABLE'), String(err)).toBe(true);
    expect((err as Error).message).toMatch(/^MySQL guard failed during open; nothing was applied: /);
  });
});

describe('the MySQL fence store, an outcome the pool answers as bytes', () => {
  it("reads it as UTF-8 text (a pool whose typeCast answers every BLOB-typed column, TEXT's too, as a Buffer)", async () => {
    const url = new URL(testMysqlUrl());
    url.pathname = `/${db.name}`;
    // A common typeCast: the protocol types TEXT columns as BLOB, so the outcome comes as bytes.
    const pool = createPool({ uri: url.toString(), typeCast: (field, next) => (field.type === 'BLOB' ? field.buffer() : next()) });
    onTestFinished(() => pool.end());
    const guard = createMysqlGuard({ db: pool, resource: nextResource() });
    await guard.guardedWrite(1n, async () => ({ sent: 'ünïcode' }), { fireId: 'bytes-fire', recordOutcome: (result) => JSON.stringify(result) });
    expect(await guard.appliedOutcome('bytes-fire')).toMatchObject({ token: 1n, outcome: '{"sent":"ünïcode"}' });
  });
});

describe('the MySQL fence store, an advance whose session is killed while it waits', () => {
  it('fails typed at once: only a deadlock or a duplicate key runs an advance again', async () => {
    const resource = nextResource();
    const writer = createMysqlGuard({ db: db.pool, resource });
    // A write of token 1 holds the fence row in its open transaction; a grace period past the test,
    // so the advance's takeover never ends it.
    let finish!: () => void;
    let holding = false;
    const write = writer.guardedWrite(1n, async () => {
      holding = true;
      await new Promise<void>((resolve) => (finish = resolve));
    });
    onTestFinished(async () => {
      finish?.();
      await write.catch(() => undefined);
    });
    await waitFor(() => holding, 10_000);
    const advancer = createMysqlGuard({ db: db.pool, resource, takeover: { graceMs: 60_000, timeoutMs: 60_000 } });
    let outcome: unknown;
    const advance = advancer.advance(2n).then(
      () => (outcome = 'advanced'),
      (err: unknown) => (outcome = err),
    );
    let waiting: number | undefined;
    await waitFor(async () => {
      // MariaDB's process list shows the statement inside the procedure that waits (the advance's row lock).
      const [rows] = await db.pool.query(
        `SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND = 'Query' AND (INFO LIKE 'CALL %advance%' OR INFO LIKE '%INTO v_highest%FOR UPDATE')`,
        [db.name],
      );
      waiting = (rows as Array<{ id: number }>)[0]?.id;
      return waiting !== undefined;
    }, 10_000);
    await db.pool.query(`KILL CONNECTION ${Number(waiting)}`);
    // Run again, the advance would wait on the same write for up to a minute.
    await waitFor(() => outcome !== undefined, 10_000);
    await advance;
    expect(isFencedError(outcome, 'GUARD_UNAVAILABLE'), String(outcome)).toBe(true);
    expect((outcome as Error).message).toMatch(/^MySQL guard failed during advance; nothing was applied: /);
    finish();
    await write;
    expect(await writer.highest()).toBe(1n);
  });
});

describe('the MySQL fence store, an advance that meets a deadlock every time', () => {
  it('runs again maxRetries times, no more and no fewer, then fails typed', async () => {
    const resource = nextResource();
    // The server refuses every advance of this resource with InnoDB's deadlock error, counting each.
    const deadlocks = await deadlockEvery(db.pool, { table: 'fenced_fences', event: 'INSERT', column: 'resource', value: resource });
    onTestFinished(() => deadlocks.drop());
    const guard = createMysqlGuard({ db: db.pool, resource, maxRetries: 3 });
    const outcome = await guard.advance(1n).then(() => 'advanced', (err: unknown) => err);
    expect(isFencedError(outcome, 'GUARD_UNAVAILABLE'), String(outcome)).toBe(true);
    expect((outcome as Error).message).toMatch(/^MySQL guard failed during advance; nothing was applied: .*Deadlock/);
    expect(await deadlocks.attempts()).toBe(4);
    expect(await guard.highest()).toBe(null);
  });
});

describe('the MySQL fence store, inspected (`fenced doctor` and `fenced status` read this)', () => {
  it("reports the server as the server itself says: product and version, isolation, read-only, timeouts, who may end sessions, the binary log", async () => {
    const inspection = await createMysqlGuard({ db: db.pool, resource: 'inspected' }).inspect();
    const [said] = (await db.pool.query(
      `SELECT VERSION() AS version, @@global.read_only AS ro, @@innodb_lock_wait_timeout AS lw, @@SESSION.tx_isolation AS iso,
              @@SESSION.max_statement_time AS mst, @@SESSION.idle_transaction_timeout AS itt, @@log_bin AS lb, @@binlog_format AS bf`,
    )) as unknown as [Array<Record<string, unknown>>];
    const server = said[0]!;
    expect(inspection.server).toEqual({
      version: `MariaDB ${String(server['version']).replace(/-.*$/, '')}`,
      defaultIsolation: String(server['iso']).toLowerCase().replace(/-/g, ' '),
      readOnly: Number(server['ro']) === 1,
      lockTimeoutMs: Number(server['lw']) * 1000,
      statementTimeoutMs: Math.round(Number(server['mst']) * 1000),
      idleInTransactionTimeoutMs: Math.round(Number(server['itt']) * 1000),
      // The test machine's MariaDB is reached as root.
      mayEndOtherRoles: true,
      binlog: { enabled: Number(server['lb']) === 1, format: String(server['bf']) },
    });
    expect(inspection.server.defaultIsolation).toMatch(/^(repeatable read|read committed|serializable|read uncommitted)$/);
  });

  it('reports a database that was never migrated as such: no migration applied, no fence, no applied fire, the server still reported', async () => {
    const migrated = await createMysqlGuard({ db: db.pool, resource: 'inspected' }).inspect();
    const inspection = await createMysqlGuard({ db: bare.pool, resource: 'inspected' }).inspect();
    expect(inspection).toEqual({ store: 'mysql', migrations: { applied: 0, known: migrated.migrations.known }, fences: [], appliedFires: { rows: 0, bytes: 0, oldest: null }, server: migrated.server });
    expect(migrated.migrations.known).toBeGreaterThan(0);
  });

  it('reports a connection with no database chosen as nothing migrated (the tables are looked for in the current database)', async () => {
    const pool = createMysqlPool({ database: null, connectionLimit: 1 });
    onTestFinished(() => pool.end());
    const [[current]] = (await pool.query('SELECT DATABASE() AS name')) as unknown as [Array<Record<string, unknown>>];
    expect(current!['name']).toBe(null);
    const inspection = await createMysqlGuard({ db: pool, resource: 'inspected' }).inspect();
    expect(inspection).toMatchObject({ migrations: { applied: 0 }, fences: [], appliedFires: { rows: 0, bytes: 0, oldest: null } });
    // Told its database, the same connection finds the store there.
    const told = await createMysqlGuard({ db: pool, resource: 'inspected', database: db.name }).inspect();
    expect(told.migrations.applied).toBe(told.migrations.known);
    expect(told.appliedFires.bytes).toBeGreaterThan(0);
  });

  it("reports the applied fires' table size as the server counts it (data and indexes), and the audit's times by the server's clock", async () => {
    const guard = createMysqlGuard({ db: db.pool, resource: 'inspected-size' });
    await guard.guardedWrite(3n, async () => undefined, { fireId: 'inspected-size@20261207T000000.000Z' });
    const { appliedFires } = await guard.inspect();
    const [[size]] = (await db.pool.query(`SELECT CAST(data_length + index_length AS CHAR) AS bytes FROM information_schema.tables WHERE table_schema = ? AND table_name LIKE '%\\_applied'`, [db.name])) as unknown as [
      Array<Record<string, unknown>>,
    ];
    expect(appliedFires.bytes).toBe(Number(size!['bytes']));
    // InnoDB gives every table at least a page: a table that exists has a size.
    expect(appliedFires.bytes).toBeGreaterThan(0);
    const serverNow = async () => Number(((await db.pool.query('SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS CHAR) AS now')) as unknown as [Array<Record<string, unknown>>])[0][0]!['now']);
    const before = await serverNow();
    await guard.lowerFence({ token: 2n, actor: 'ops@example', reason: 'dated by the server' });
    const after = await serverNow();
    const [entry] = await guard.auditLog('inspected-size', 1);
    expect(entry!.at.getTime()).toBeGreaterThanOrEqual(before);
    expect(entry!.at.getTime()).toBeLessThanOrEqual(after);
  });

  it.each([
    ['a user who may only read its database', '', false],
    ['a user granted SUPER', 'SUPER', true],
    ['a user granted CONNECTION ADMIN (MariaDB 10.5 split it from SUPER)', 'CONNECTION ADMIN', true],
    ['a user granted all privileges on its database alone', 'ALL PRIVILEGES ON DATABASE', false],
  ])('reports whether the user may end other sessions from its grants: %s', async (_, grant, may) => {
    const user = `fenced_inspect_${process.pid}_${Math.floor(Math.random() * 1e9)}`;
    await db.pool.query(`CREATE USER '${user}'@'%'`);
    onTestFinished(async () => {
      await db.pool.query(`DROP USER '${user}'@'%'`);
    });
    await db.pool.query(`GRANT SELECT ON \`${db.name}\`.* TO '${user}'@'%'`);
    if (grant === 'ALL PRIVILEGES ON DATABASE') await db.pool.query(`GRANT ALL PRIVILEGES ON \`${db.name}\`.* TO '${user}'@'%'`);
    else if (grant !== '') await db.pool.query(`GRANT ${grant} ON *.* TO '${user}'@'%'`);
    const pool = createMysqlPool({ database: db.name, user, connectionLimit: 1 });
    onTestFinished(() => pool.end());
    const { server } = await createMysqlGuard({ db: pool, resource: 'inspected' }).inspect();
    expect(server.mayEndOtherRoles).toBe(may);
  });

  it('reports a read-only server with its binary log on as such (a server of its own, started so)', { timeout: 60_000 }, async () => {
    const server = await startMariadbServer({ settings: { 'read-only': 'ON', 'log-bin': 'fenced-bin', 'binlog-format': 'ROW' } });
    onTestFinished(() => server.stop());
    const pool = createPool({ uri: server.url, connectionLimit: 1 });
    onTestFinished(() => pool.end());
    const inspection = await createMysqlGuard({ db: pool, resource: 'inspected' }).inspect();
    expect(inspection.server).toMatchObject({ readOnly: true, binlog: { enabled: true, format: 'ROW' } });
    expect(inspection.migrations.applied).toBe(0);
  });

  it('reports a session whose timeouts are set as set: a statement and an idle transaction ended after so many seconds', async () => {
    const pool = createMysqlPool({ database: db.name, connectionLimit: 1 });
    onTestFinished(() => pool.end());
    const connection = await pool.getConnection();
    await connection.query('SET SESSION max_statement_time = 2.5, SESSION idle_transaction_timeout = 7, SESSION innodb_lock_wait_timeout = 3');
    connection.release();
    const { server } = await createMysqlGuard({ db: pool, resource: 'inspected' }).inspect();
    expect(server).toMatchObject({ statementTimeoutMs: 2500, idleInTransactionTimeoutMs: 7000, lockTimeoutMs: 3000 });
  });
});
