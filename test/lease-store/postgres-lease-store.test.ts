/**
 * The PostgreSQL lease store's adapter (postgres-lease-store.ts) where the conformance suite does not
 * look (sql-lease-store-adapter.ts, asked of MySQL's too).
 */
import { postgresLeases } from '@fenced/coordinator/postgres';
import { createPool, createTestSchema } from '#test-support';
import { onTestFinished } from 'vitest';
import { describeSqlLeaseStoreAdapter } from './sql-lease-store-adapter.js';

let schema: Awaited<ReturnType<typeof createTestSchema>>;

describeSqlLeaseStoreAdapter({
  database: 'PostgreSQL',
  async setup() {
    schema = await createTestSchema('lstore_pg');
    await postgresLeases({ pool: schema.pool, schema: schema.name }).migrate();
  },
  teardown: async () => schema?.drop(),
  openLease: (lease, takeover) => postgresLeases({ pool: schema.pool, schema: schema.name, listen: 'poll', pollMs: 50, ...(takeover === undefined ? {} : { takeover }) }).openLease(lease, 'node-a', 15_000),
  async openLeaseOnHeldPool(lease) {
    const pool = createPool({ max: 1 });
    onTestFinished(() => pool.end());
    const held = await pool.connect();
    onTestFinished(() => held.release());
    return postgresLeases({ pool, schema: schema.name }).openLease(lease, 'node-a', 15_000);
  },
  async holdLeaseRow(lease) {
    const client = await schema.pool.connect();
    client.on('error', () => {});
    onTestFinished(async () => {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release();
    });
    await client.query('BEGIN');
    await client.query(`SELECT token FROM "${schema.name}".fenced_fences_leases WHERE name = $1 FOR UPDATE`, [lease]);
  },
  acquireOnHeldRow: 'not granted',
  async elections(lease) {
    const { rows } = await schema.pool.query(`SELECT node, token::text AS token, ttl_ms::int AS ttl_ms, fences, regressed FROM "${schema.name}".fenced_fences_elections WHERE lease = $1`, [lease]);
    return rows.map((r: Record<string, unknown>) => ({ node: String(r['node']), token: String(r['token']), ttlMs: Number(r['ttl_ms']), fences: Number(r['fences']), regressed: r['regressed'] === true }));
  },
});
