import { testDatabaseUrl } from '#test-support';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { postgresLeases, type PostgresLeases } from '@fenced/coordinator/postgres';
import pg from 'pg';
import { describeLeaseStoreConformance } from './conformance.js';

let schemaName: string;
let admin: pg.Pool;
const pools = new Map<PostgresLeases, pg.Pool>();

describeLeaseStoreConformance({
  name: 'postgres',
  localGuard: (resource) => createPostgresGuard({ db: admin, resource, schema: schemaName }),
  async setup(schema) {
    schemaName = schema.name;
    admin = schema.pool;
    await postgresLeases({ pool: admin, schema: schemaName }).migrate();
  },
  async teardown() {
    await Promise.all([...pools.values()].map((pool) => pool.end().catch(() => undefined)));
  },
  backend() {
    // One pool per simulated process, as each replica has its own, named so that cut() finds it.
    const pool = new pg.Pool({ connectionString: testDatabaseUrl(), max: 4, application_name: `cut-${schemaName}-${pools.size}` });
    const backend = postgresLeases({ pool, schema: schemaName });
    pools.set(backend, pool);
    return backend;
  },
  async cut(backend) {
    const pool = pools.get(backend as PostgresLeases)!;
    // The pool ended (no reconnect can bring it back), then every backend of it killed, the LISTEN
    // connection's included: the store is gone for that process, mid-term.
    const ended = pool.end().catch(() => undefined);
    await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [(pool.options as { application_name: string }).application_name]);
    await ended;
  },
  isFree: async (lease) => {
    const { rows } = await admin.query(`SELECT holder IS NULL OR expires_at <= clock_timestamp() AS free FROM "${schemaName}"."fenced_fences_leases" WHERE name = $1`, [lease]);
    return rows[0] === undefined || (rows[0] as { free: boolean }).free;
  },
});
