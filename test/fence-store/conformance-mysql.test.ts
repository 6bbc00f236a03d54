import { createGuard } from '@fenced/consumer-guard';
import { createMysqlGuard, mysqlFences } from '@fenced/consumer-guard/mysql';
import { createTestMysqlDatabase, waitFor } from '#test-support';
import type { PoolConnection } from 'mysql2/promise';
import { describe, expect, it } from 'vitest';
import { describeFenceStoreConformance } from './conformance.js';

let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;

describeFenceStoreConformance({
  name: 'mysql',
  async setup() {
    db = await createTestMysqlDatabase('fence_conf');
    await db.pool.query('CREATE TABLE effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, resource VARCHAR(255) NOT NULL, token BIGINT NOT NULL) ENGINE = InnoDB');
  },
  teardown: () => db.drop(),
  guard: (resource, settings = {}) => createMysqlGuard({ db: db.pool, resource, ...settings }),
  async insertEffect(trx, resource, token) {
    await (trx as PoolConnection).query('INSERT INTO effects (resource, token) VALUES (?, ?)', [resource, token.toString()]);
  },
  async countEffectsIn(trx, resource) {
    const [rows] = await (trx as PoolConnection).query('SELECT COUNT(*) AS n FROM effects WHERE resource = ?', [resource]);
    return Number((rows as Array<{ n: number }>)[0]!.n);
  },
  async effects(resource) {
    const [rows] = await db.pool.query('SELECT CAST(token AS CHAR) AS token FROM effects WHERE resource = ? ORDER BY id', [resource]);
    return (rows as Array<{ token: string }>).map((row) => BigInt(row.token));
  },
  async sessionOf(trx) {
    const [rows] = await (trx as PoolConnection).query('SELECT CONNECTION_ID() AS id');
    return String((rows as Array<{ id: number }>)[0]!.id);
  },
  async kill(session) {
    await db.pool.query(`KILL CONNECTION ${Number(session)}`);
  },
  async waitForLockWait(sessions = 1) {
    // A statement on the fences that has run for 100 ms on loopback waits on a lock. (MariaDB's
    // INNODB_TRX does not always list a transaction that waits inside a procedure; its PROCESSLIST,
    // with TIME_MS, does.)
    await waitFor(async () => {
      const [rows] = await db.pool.query(
        `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND = 'Query' AND INFO LIKE '%fenced_fences%' AND TIME_MS > 100`,
        [db.name],
      );
      return Number((rows as Array<{ n: number }>)[0]!.n) >= sessions;
    }, 20_000);
  },
  async recordNewerMigration() {
    await db.pool.query('INSERT INTO fenced_fences_migrations (id) VALUES (999999)');
    return { undo: async () => void (await db.pool.query('DELETE FROM fenced_fences_migrations WHERE id = 999999')) };
  },
  writeIn: {
    guard: (resource) => createGuard({ store: mysqlFences({ db: db.pool }), resource }),
    async begin() {
      const connection = await db.pool.getConnection();
      await connection.beginTransaction();
      const end = async (statement: () => Promise<void>) => {
        try {
          await statement();
        } finally {
          connection.release();
        }
      };
      // An executor, as a queue hands its worker one (the guard also takes the connection itself:
      // mysql-guard.test.ts).
      const tx = { executeSql: async (text: string, values?: unknown[]) => ({ rows: (await connection.query(text, values))[0] as unknown[] }) };
      return { tx, commit: () => end(() => connection.commit()), rollback: () => end(() => connection.rollback()) };
    },
    async insertEffectIn(tx, resource, token) {
      await tx.executeSql('INSERT INTO effects (resource, token) VALUES (?, ?)', [resource, token.toString()]);
    },
    async countEffectsIn(tx, resource) {
      const { rows } = await tx.executeSql('SELECT COUNT(*) AS n FROM effects WHERE resource = ?', [resource]);
      return Number((rows as Array<{ n: number }>)[0]!.n);
    },
  },
});

describe('the MySQL fence store, applied times', () => {
  it('reads an applied time back truncated to the millisecond, never after the record: a read since that time finds it', async () => {
    const own = await createTestMysqlDatabase('applied_times');
    try {
      const guard = createMysqlGuard({ db: own.pool, resource: 'applied-times' });
      await guard.migrate();
      const fireId = 'invoices@20261202T100000.000Z';
      await guard.guardedWrite(1n, async () => undefined, { fireId });
      // 900 µs into a millisecond: rounding would date it a millisecond after it was applied.
      await own.pool.query('UPDATE fenced_fences_applied SET applied_at = FROM_UNIXTIME(1796205600.000900) WHERE fire_id = ?', [fireId]);
      const applied = await guard.lastAppliedFire();
      expect(applied?.appliedAt).toEqual(new Date(1_796_205_600_000));
      expect(await guard.lastAppliedFires(applied!.appliedAt)).toEqual(new Map([['invoices', Date.parse('2026-12-02T10:00:00.000Z')]]));
      expect((await guard.inspect()).fences[0]).toMatchObject({ oldestAppliedAt: new Date(1_796_205_600_000) });
    } finally {
      await own.drop();
    }
  });
});
