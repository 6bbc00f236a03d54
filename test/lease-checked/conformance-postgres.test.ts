import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { postgresLeases } from '@fenced/coordinator/postgres';
import { createTestSchema } from '#test-support';
import type pg from 'pg';
import { describeLeaseCheckedConformance, type LeaseCheckedGuard } from './conformance.js';

let schema: Awaited<ReturnType<typeof createTestSchema>>;

describeLeaseCheckedConformance({
  name: 'postgres',
  async setup() {
    schema = await createTestSchema('lc_conf');
    await createPostgresGuard({ db: schema.pool, resource: 'setup', schema: schema.name }).migrate();
    await postgresLeases({ pool: schema.pool, schema: schema.name }).migrate();
    await schema.pool.query(`CREATE TABLE "${schema.name}".effects (id serial PRIMARY KEY, token bigint NOT NULL)`);
  },
  teardown: () => schema.drop(),
  openLease: (lease, nodeId, takeover) => postgresLeases({ pool: schema.pool, schema: schema.name, takeover }).openLease(lease, nodeId, 15_000),
  guard: (resource, lease, logger) => createPostgresGuard({ db: schema.pool, resource, schema: schema.name, checkLease: lease, logger }) as unknown as LeaseCheckedGuard,
  insert: (token) => (client: never) => (client as pg.PoolClient).query(`INSERT INTO "${schema.name}".effects (token) VALUES ($1)`, [token.toString()]),
  rows: async (token) => Number(((await schema.pool.query(`SELECT count(*)::int AS n FROM "${schema.name}".effects WHERE token = $1`, [token.toString()])).rows[0] as { n: number }).n),
  expired: async (lease) =>
    ((await schema.pool.query(`SELECT holder IS NULL OR expires_at <= clock_timestamp() AS over FROM "${schema.name}"."fenced_fences_leases" WHERE name = $1`, [lease])).rows[0] as { over: boolean } | undefined)?.over ?? true,
  async beginReading(lease) {
    const client = await schema.pool.connect();
    client.on('error', () => {});
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await client.query(`SELECT expires_at FROM "${schema.name}"."fenced_fences_leases" WHERE name = $1`, [lease]);
    return {
      tx: client as never,
      async end() {
        try {
          await client.query('ROLLBACK');
        } finally {
          client.release();
        }
      },
    };
  },
  grantWaiting: async () => ((await schema.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%lease_acquire%'`)).rows[0] as { n: number }).n > 0,
});
