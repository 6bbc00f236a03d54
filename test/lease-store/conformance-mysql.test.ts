import { MYSQL_NOW_US_SQL } from '@fenced/shared/internal';
import { createMysqlGuard } from '@fenced/consumer-guard/mysql';
import { mysqlLeases, type MysqlLeases } from '@fenced/coordinator/mysql';
import { createMysqlPool, createTestMysqlDatabase } from '#test-support';
import type { Pool } from 'mysql2/promise';
import { describeLeaseStoreConformance } from './conformance.js';

let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;
const pools = new Map<MysqlLeases, Pool>();

describeLeaseStoreConformance({
  name: 'mysql',
  async setup() {
    db = await createTestMysqlDatabase('lease_conf');
    await createMysqlGuard({ db: db.pool, resource: 'setup' }).migrate();
    await mysqlLeases({ pool: db.pool }).migrate();
  },
  async teardown() {
    await Promise.all([...pools.values()].map((pool) => pool.end().catch(() => undefined)));
    await db.drop();
  },
  backend() {
    // One pool per simulated process, as each replica has its own.
    const pool = createMysqlPool({ database: db.name, connectionLimit: 4 });
    const backend = mysqlLeases({ pool });
    pools.set(backend, pool);
    return backend;
  },
  async cut(backend) {
    const pool = pools.get(backend as MysqlLeases)!;
    // Its connections' ids first, then the pool ended (no reconnect can bring it back), then every
    // session of it killed: the store is gone for that process, mid-term.
    const ids = await connectionIds(pool);
    const ended = pool.end().catch(() => undefined);
    for (const id of ids) await db.pool.query(`KILL CONNECTION ${id}`).catch(() => undefined);
    await ended;
  },
  isFree: async (lease) => {
    const [rows] = await db.pool.query(`SELECT holder IS NULL OR expires_us <= ${MYSQL_NOW_US_SQL} AS free FROM fenced_fences_leases WHERE name = ?`, [lease]);
    const row = (rows as Array<{ free: number }>)[0];
    return row === undefined || Number(row.free) === 1;
  },
  localGuard: (resource) => createMysqlGuard({ db: db.pool, resource }),
  async expectedConfigProblem() {
    // The private MariaDB of the unit project flushes its log once a second (tests are not about
    // durability): that is what the store must report. A server given by MYSQL_URL may be safe.
    const [rows] = await db.pool.query('SELECT @@GLOBAL.innodb_flush_log_at_trx_commit AS flush');
    const flush = Number((rows as Array<{ flush: number }>)[0]!.flush);
    return flush === 1 ? null : new RegExp(`^innodb_flush_log_at_trx_commit is ${flush}: a crash can lose a granted lease`);
  },
});

/** The thread ids of the pool's open connections (each asked on itself). */
async function connectionIds(pool: Pool): Promise<number[]> {
  const held = await Promise.all(Array.from({ length: 4 }, () => pool.getConnection()));
  const ids = await Promise.all(held.map(async (c) => Number(((await c.query('SELECT CONNECTION_ID() AS id'))[0] as Array<{ id: number }>)[0]!.id)));
  for (const c of held) c.release();
  return ids;
}
