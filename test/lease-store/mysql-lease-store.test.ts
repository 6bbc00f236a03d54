/**
 * The MySQL lease store's adapter (mysql-lease-store.ts) where the conformance suite does not look
 * (sql-lease-store-adapter.ts, asked of PostgreSQL's too). The grant and its takeover:
 * mysql-grant-takeover.test.ts.
 */
import { createMysqlGuard } from '@fenced/consumer-guard/mysql';
import { mysqlLeases } from '@fenced/coordinator/mysql';
import { createMysqlPool, createTestMysqlDatabase } from '#test-support';
import { onTestFinished } from 'vitest';
import { describeSqlLeaseStoreAdapter } from './sql-lease-store-adapter.js';

let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;
const database = () => db;

describeSqlLeaseStoreAdapter({
  database: 'MySQL',
  async setup() {
    db = await createTestMysqlDatabase('my_lstore');
    await createMysqlGuard({ db: db.pool, resource: 'setup' }).migrate();
    await mysqlLeases({ pool: db.pool }).migrate();
  },
  teardown: async () => db?.drop(),
  openLease: (lease, takeover) => mysqlLeases({ pool: database().pool, pollMs: 50, ...(takeover === undefined ? {} : { takeover }) }).openLease(lease, 'node-a', 15_000),
  async openLeaseOnHeldPool(lease) {
    const pool = createMysqlPool({ database: database().name, connectionLimit: 1 });
    onTestFinished(() => pool.end());
    const held = await pool.getConnection();
    onTestFinished(() => held.release());
    return mysqlLeases({ pool }).openLease(lease, 'node-a', 15_000);
  },
  async holdLeaseRow(lease) {
    const connection = await database().pool.getConnection();
    onTestFinished(async () => {
      await connection.rollback().catch(() => undefined);
      connection.release();
    });
    await connection.beginTransaction();
    await connection.query('SELECT token FROM fenced_fences_leases WHERE name = ? FOR UPDATE', [lease]);
  },
  acquireOnHeldRow: 'times out',
  async elections(lease) {
    const [rows] = await database().pool.query('SELECT CAST(node AS CHAR) AS node, CAST(token AS CHAR) AS token, ttl_ms, fences, regressed FROM fenced_fences_elections WHERE lease = ?', [lease]);
    return (rows as Array<Record<string, unknown>>).map((r) => ({ node: String(r['node']), token: String(r['token']), ttlMs: Number(r['ttl_ms']), fences: Number(r['fences']), regressed: Number(r['regressed']) === 1 }));
  },
});
