import { MYSQL_NOW_US_SQL } from '@fenced/shared/internal';
import { createMysqlGuard } from '@fenced/consumer-guard/mysql';
import { mysqlLeases } from '@fenced/coordinator/mysql';
import { createTestMysqlDatabase } from '#test-support';
import type { PoolConnection } from 'mysql2/promise';
import { describeLeaseCheckedConformance, type LeaseCheckedGuard } from './conformance.js';

let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;

describeLeaseCheckedConformance({
  name: 'mysql',
  async setup() {
    db = await createTestMysqlDatabase('my_leasechecked');
    await createMysqlGuard({ db: db.pool, resource: 'setup' }).migrate();
    await mysqlLeases({ pool: db.pool }).migrate();
    await db.pool.query('CREATE TABLE effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, token BIGINT NOT NULL) ENGINE = InnoDB');
  },
  teardown: () => db.drop(),
  openLease: (lease, nodeId, takeover) => mysqlLeases({ pool: db.pool, takeover }).openLease(lease, nodeId, 15_000),
  guard: (resource, lease, logger) => createMysqlGuard({ db: db.pool, resource, checkLease: lease, logger }) as unknown as LeaseCheckedGuard,
  insert: (token) => (connection: never) => (connection as PoolConnection).query('INSERT INTO effects (token) VALUES (?)', [token.toString()]),
  rows: async (token) => Number(((await db.pool.query('SELECT COUNT(*) AS n FROM effects WHERE token = ?', [token.toString()]))[0] as Array<{ n: number }>)[0]!.n),
  expired: async (lease) =>
    ((await db.pool.query(`SELECT 1 FROM fenced_fences_leases WHERE name = ? AND (holder IS NULL OR expires_us <= ${MYSQL_NOW_US_SQL})`, [lease]))[0] as unknown[]).length === 1,
  async beginReading(lease) {
    const connection = await db.pool.getConnection();
    await connection.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    await connection.beginTransaction();
    await connection.query('SELECT expires_us FROM fenced_fences_leases WHERE name = ?', [lease]);
    return {
      tx: connection as never,
      async end() {
        try {
          await connection.rollback();
        } finally {
          connection.release();
        }
      },
    };
  },
  // MariaDB's process list shows the statement inside the procedure that waits.
  grantWaiting: async () =>
    Number(((await db.pool.query(`SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND = 'Query' AND INFO LIKE '%lease_terms%FOR UPDATE%' AND TIME_MS > 50`, [db.name]))[0] as Array<{ n: number }>)[0]!.n) > 0,
});
