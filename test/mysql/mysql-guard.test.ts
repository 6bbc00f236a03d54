// The MySQL/MariaDB store above its conformance suite: through Kysely's MysqlDialect, under the
// combined guard (Redis fast path) and the handler wrapper, and what happens to the host when the
// server ends its sessions.
import { createGuard, isFencedError, type Envelope, type HandlerContext } from '@fenced/consumer-guard';
import { createMysqlGuard, mysqlFences } from '@fenced/consumer-guard/mysql';
import { createRedisGuard } from '@fenced/consumer-guard/redis';
import { createRedis, createTestMysqlDatabase, deleteKeys, testMysqlUrl, uniquePrefix, waitFor } from '#test-support';
import type { Redis } from 'ioredis';
import { Kysely, MysqlDialect, sql, type Generated } from 'kysely';
import mysqlCallbacks from 'mysql2';
import type { PoolConnection } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface Db {
  ledger: { id: Generated<number>; fire_id: string; token: string; amount: number };
}

let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;
let redis: Redis;
const prefix = uniquePrefix('mysql');
let n = 0;

beforeAll(async () => {
  db = await createTestMysqlDatabase('mysql_guard');
  await db.pool.query('CREATE TABLE ledger (id INT AUTO_INCREMENT PRIMARY KEY, fire_id VARCHAR(255) NOT NULL, token BIGINT NOT NULL, amount INT NOT NULL) ENGINE = InnoDB');
  await createMysqlGuard({ db: db.pool, resource: 'setup' }).migrate();
  redis = createRedis();
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  redis.disconnect();
  await db.drop();
});

function envelope(token: string, overrides: Partial<Envelope> = {}): Envelope {
  n++;
  return { v: 1, job: 'invoices', fireId: `invoices@fire-${n}`, scheduledAt: '2026-12-02T10:00:00.000Z', token, issuer: 'node-a', payload: { amount: 7 }, ...overrides };
}

function kyselyOverMysql(): { kysely: Kysely<Db>; pool: mysqlCallbacks.Pool } {
  const url = new URL(testMysqlUrl());
  url.pathname = `/${db.name}`;
  const pool = mysqlCallbacks.createPool({ uri: url.toString(), connectionLimit: 4 });
  return { kysely: new Kysely<Db>({ dialect: new MysqlDialect({ pool }) }), pool };
}

describe('the MySQL store', () => {
  it('runs fn in a Kysely transaction over MysqlDialect, checked in the same transaction', async () => {
    const { kysely, pool } = kyselyOverMysql();
    const guard = createMysqlGuard({ db: kysely, pool, resource: `k-${++n}` });
    await guard.guardedWrite(3n, (trx) => trx.insertInto('ledger').values({ fire_id: 'k1', token: '3', amount: 1 }).execute());
    const refused = await guard.guardedWrite(2n, (trx) => trx.insertInto('ledger').values({ fire_id: 'k2', token: '2', amount: 1 }).execute()).catch((e: unknown) => e);
    expect(isFencedError(refused, 'STALE_TOKEN')).toBe(true);
    // fn's own error rolls the whole transaction back, the fence included.
    await expect(
      guard.guardedWrite(9n, async (trx) => {
        await trx.insertInto('ledger').values({ fire_id: 'k3', token: '9', amount: 1 }).execute();
        throw new Error('mine');
      }),
    ).rejects.toThrow('mine');
    expect(await guard.highest()).toBe(3n);
    // A nested transaction would commit the guarded one half way: refused.
    await expect(guard.guardedWrite(3n, (trx) => (trx as unknown as Kysely<Db>).transaction().execute(async () => undefined))).rejects.toThrow(/not supported/);
    const rows = await sql<{ fire_id: string }>`SELECT fire_id FROM ledger WHERE fire_id LIKE 'k%' ORDER BY id`.execute(kysely);
    expect(rows.rows.map((r) => r.fire_id)).toEqual(['k1']);
    await kysely.destroy();
  });

  it('refuses a Kysely instance without its pool, and options given beside a store, with a ConfigError naming them', () => {
    const { kysely } = kyselyOverMysql();
    expect(() => createMysqlGuard({ db: kysely, resource: 'x' } as never)).toThrow(expect.objectContaining({ code: 'INVALID_CONFIG' }));
    expect(() => createGuard({ store: mysqlFences({ db: db.pool }), resource: 'x', schema: 'public' } as never)).toThrow(/schema/);
    expect(() => mysqlFences({ db: db.pool, table: 'Bad-Name' })).toThrow(expect.objectContaining({ code: 'INVALID_CONFIG' }));
    void kysely.destroy();
  });

  it('refuses a store that is not one with a ConfigError whose suggestion works as written (a regression: it suggested mysqlFences({ pool }), itself refused)', () => {
    const refused = (() => {
      try {
        createGuard({ store: { not: 'a store' }, resource: 'x' } as never);
      } catch (err) {
        return err as Error;
      }
    })();
    expect(refused).toMatchObject({ code: 'INVALID_CONFIG' });
    const suggestion = /such as (mysqlFences\(\{ [^}]* \}\))/.exec(refused!.message)?.[1];
    expect(suggestion).toBe('mysqlFences({ db: pool })');
    const pool = db.pool;
    expect(() => createGuard({ store: mysqlFences({ db: pool }), resource: 'x' })).not.toThrow();
  });

  it('serves the combined guard and the handler: Redis refuses a stale fire without a query, duplicates apply once', async () => {
    const resource = `h-${++n}`;
    const guard = createGuard({ store: mysqlFences({ db: db.pool }), resource, redis, keyPrefix: prefix });
    const handle = guard.wrapHandler((payload: unknown, ctx: HandlerContext<PoolConnection>) =>
      ctx.guardedWrite(async (conn) => {
        await conn.query('INSERT INTO ledger (fire_id, token, amount) VALUES (?, ?, ?)', [ctx.fireId, ctx.token.toString(), (payload as { amount: number }).amount]);
        return 'written';
      }),
      { onStale: 'return' },
    );
    const first = envelope('5');
    expect(await handle(first)).toMatchObject({ status: 'applied', result: 'written' });
    const again = await Promise.all(Array.from({ length: 6 }, () => handle(structuredClone(first))));
    expect(again.every((o) => o.status === 'duplicate')).toBe(true);
    expect(await handle(envelope('7'))).toMatchObject({ status: 'applied' });
    expect(await guard.highest()).toBe(7n);
    // The mark followed the store: a stale fire is refused on Redis.
    expect(await handle(envelope('6'))).toMatchObject({ status: 'stale', token: 6n, highest: 7n });
    const [rows] = await db.pool.query('SELECT COUNT(*) AS n FROM ledger WHERE fire_id = ?', [first.fireId]);
    expect(Number((rows as Array<{ n: number }>)[0]!.n)).toBe(1);
    expect((await guard.inspect()).store).toBe('mysql');
    await guard.close();
  });

  it("guardedWriteIn joins the caller's transaction as the caller has it (a mysql2 connection, a Kysely transaction), commits or rolls back with it, and refuses a pool or a connection with no transaction before writing anything", async () => {
    const resource = `in-${++n}`;
    const guard = createMysqlGuard({ db: db.pool, resource });
    await guard.advance(5n);
    const ledger = async () => {
      const [rows] = await db.pool.query("SELECT fire_id FROM ledger WHERE fire_id LIKE ? ORDER BY id", [`${resource}:%`]);
      return (rows as Array<{ fire_id: string }>).map((r) => r.fire_id);
    };
    const insert = (conn: PoolConnection, id: string, token: bigint) => conn.query('INSERT INTO ledger (fire_id, token, amount) VALUES (?, ?, 1)', [`${resource}:${id}`, token.toString()]);

    // A mysql2 connection after beginTransaction(): fn gets the very connection back.
    const conn = await db.pool.getConnection();
    try {
      await conn.beginTransaction();
      const seen = await guard.guardedWriteIn(conn, 6n, async (tx, ctx) => {
        await insert(tx, 'a', ctx.token);
        return tx;
      });
      expect(seen).toBe(conn);
      await conn.rollback();
      expect(await guard.highest()).toBe(5n);
      expect(await ledger()).toEqual([]);

      // A refusal leaves the caller's transaction usable: its own write before and after commits.
      await conn.beginTransaction();
      await insert(conn, 'own-1', 0n);
      await expect(guard.guardedWriteIn(conn, 4n, (tx) => insert(tx, 'stale', 4n))).rejects.toMatchObject({ code: 'STALE_TOKEN', highest: 5n });
      await guard.guardedWriteIn(conn, 6n, (tx) => insert(tx, 'b', 6n), { fireId: `${resource}@f1` });
      await conn.commit();
      expect(await guard.highest()).toBe(6n);
      expect(await ledger()).toEqual([`${resource}:own-1`, `${resource}:b`]);

      // Autocommit, no transaction open: refused before the check could commit on its own.
      const noTx = await guard.guardedWriteIn(conn, 7n, (tx) => insert(tx, 'autocommit', 7n)).catch((e: unknown) => e);
      expect(noTx).toBeInstanceOf(TypeError);
      expect(String(noTx)).toMatch(/not in a transaction/);
    } finally {
      conn.release();
    }
    expect(await guard.highest()).toBe(6n);
    expect(await ledger()).toEqual([`${resource}:own-1`, `${resource}:b`]);

    // A pool is not a transaction.
    const pooled = await guard.guardedWriteIn(db.pool as never, 7n, async () => undefined).catch((e: unknown) => e);
    expect(String(pooled)).toMatch(/TypeError: guardedWriteIn: tx is a pool/);

    // A Kysely transaction over MysqlDialect; the guard's own refusal inside it, the same.
    const { kysely, pool } = kyselyOverMysql();
    const viaKysely = createMysqlGuard({ db: kysely, pool, resource });
    await kysely.transaction().execute(async (trx) => {
      await viaKysely.guardedWriteIn(trx, 7n, (tx) => tx.insertInto('ledger').values({ fire_id: `${resource}:k`, token: '7', amount: 1 }).execute());
      await expect(viaKysely.guardedWriteIn(trx, 7n, async () => undefined, { fireId: `${resource}@f2` })).resolves.toBeUndefined();
      await expect(viaKysely.guardedWriteIn(trx, 7n, async () => undefined, { fireId: `${resource}@f2` })).rejects.toMatchObject({ code: 'DUPLICATE_FIRE' });
    });
    await expect(viaKysely.guardedWriteIn(kysely as never, 8n, async () => undefined)).rejects.toThrow(/Kysely instance, not a transaction/);
    await kysely.destroy();
    expect(await guard.highest()).toBe(7n);
    expect(await ledger()).toEqual([`${resource}:own-1`, `${resource}:b`, `${resource}:k`]);
  });

  it("records a refusal the MySQL store made, behind the Redis fast path, as the MySQL store's (a regression: recorded via 'postgres')", async () => {
    const resource = `via-${++n}`;
    const keyPrefix = `${prefix}-via`;
    // A guard without Redis raises the fence, so the fast path's mark knows nothing of it.
    await createMysqlGuard({ db: db.pool, resource }).guardedWrite(5n, async () => undefined);
    const guard = createGuard({ store: mysqlFences({ db: db.pool }), resource, redis, keyPrefix });
    const refused = await guard.guardedWrite(3n, async () => undefined).catch((e: unknown) => e);
    expect(isFencedError(refused, 'STALE_TOKEN')).toBe(true);
    await guard.close();
    const { refusalsKey } = createRedisGuard({ redis, resource, keyPrefix });
    const [[, fields]] = (await redis.xrange(refusalsKey, '-', '+')) as [[string, string[]]];
    expect(fields).toEqual(['resource', resource, 'token', '3', 'highest', '5', 'via', 'mysql', 'fire', '']);
  });

  it('survives the server ending every session, idle or checked out: the process lives, the write fails closed, the next one works', async () => {
    const { kysely, pool } = kyselyOverMysql();
    const events: string[] = [];
    const viaPool = createMysqlGuard({ db: db.pool, resource: `s-${++n}`, logger: (e) => events.push(e.type) });
    const viaKysely = createMysqlGuard({ db: kysely, pool, resource: `s-${++n}`, logger: (e) => events.push(e.type) });
    // Warm both pools, so idle connections exist to be killed.
    await Promise.all([viaPool.guardedWrite(1n, async () => undefined), viaKysely.guardedWrite(1n, async () => undefined)]);
    const killAll = async () => {
      const [sessions] = await db.pool.query('SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()', [db.name]);
      for (const { ID } of sessions as Array<{ ID: number }>) await db.pool.query(`KILL CONNECTION ${ID}`).catch(() => undefined);
    };
    const inFlight = viaPool.guardedWrite(2n, async (conn) => {
      await killAll();
      await (conn as PoolConnection).query('SELECT 1');
    });
    expect(isFencedError(await inFlight.catch((e: unknown) => e), 'GUARD_UNAVAILABLE')).toBe(true);
    await killAll();
    // Both guards go on, on fresh connections.
    await waitFor(async () => (await viaPool.guardedWrite(2n, async () => true).catch(() => false)) === true, 10_000, 50);
    await waitFor(async () => (await viaKysely.guardedWrite(2n, async () => true).catch(() => false)) === true, 10_000, 50);
    expect(await viaPool.highest()).toBe(2n);
    expect(events).toContain('guard.unavailable');
    await kysely.destroy();
  });
});
