/**
 * The PostgreSQL lease store's adapter (postgres-lease-store.ts) where the conformance suite does not
 * look (sql-lease-store-adapter.ts, asked of MySQL's too).
 */
import { postgresLeases } from '@fenced/coordinator/postgres';
import { startFaultProxy } from '@fenced/chaos';
import { createPool, createTestSchema, testDatabaseUrl } from '#test-support';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { describeSqlLeaseStoreAdapter } from './sql-lease-store-adapter.js';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let confirmSchema: Awaited<ReturnType<typeof createTestSchema>>;

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

// PostgreSQL's own: a schema of its own for the tests below.
beforeAll(async () => {
  confirmSchema = await createTestSchema('lconfirm_pg');
  await postgresLeases({ pool: confirmSchema.pool, schema: confirmSchema.name }).migrate();
});
afterAll(async () => confirmSchema?.drop());

describe("the PostgreSQL lease store's primary confirmation", () => {
  it('waits for a member that never answers no longer than the command bound, not the renew’s whole time: the primary’s answer counts the renew', async () => {
    // A member whose connection is up and silent (a frozen server): its pool's query never answers.
    const database = new URL(testDatabaseUrl());
    const silent = await startFaultProxy(Number(database.port || 5432));
    silent.setMode({ kind: 'drop' });
    database.port = String(silent.port);
    const frozenMember = createPool({ connectionString: database.toString(), max: 1 });
    onTestFinished(async () => {
      await silent.close(); // the pending connect fails, so the pool can end
      await frozenMember.end();
    });
    const commandBoundMs = 300;
    const store = postgresLeases({
      pool: confirmSchema.pool,
      schema: confirmSchema.name,
      listen: 'poll',
      confirmPrimary: { members: [confirmSchema.pool, frozenMember], timeoutMs: 60_000 },
    }).openLease('confirmed', 'node-a', commandBoundMs);
    const won = await store.acquire(60_000, 5000);
    if (!won.won) throw new Error('not granted');

    const renewMs = 30_000;
    const started = performance.now();
    const reply = await store.renew(won.leaseValue, 60_000, () => started + renewMs - performance.now());
    const tookMs = performance.now() - started;
    expect(reply.renewed).toBe(true);
    // Waiting out the renew's time instead would use up a leader's whole margin on every renewal
    // while a replica is frozen. The bound is 300 ms; a busy machine adds to it, never 30 s.
    expect(tookMs).toBeLessThan(renewMs / 2);
  });
});

describe("the PostgreSQL lease store's grant", () => {
  it('a grant behind a held lease row gives up at its budget, measured by the server: its last wait is what is left of the budget, not a whole grace period', async () => {
    const leases = postgresLeases({ pool: confirmSchema.pool, schema: confirmSchema.name, listen: 'poll', takeover: { graceMs: 2500, timeoutMs: 3000 } });
    const store = leases.openLease('held-row', 'node-a', 15_000);
    const won = await store.acquire(60_000, 5000);
    if (!won.won) throw new Error('not granted');
    expect(await store.release(won.leaseValue, 5000)).toBe(true);
    // A session the takeover never ends (it names no token) holds the free lease's row.
    const holder = await confirmSchema.pool.connect();
    onTestFinished(async () => {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    });
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM "${confirmSchema.name}".fenced_fences_leases WHERE name = 'held-row' FOR UPDATE`);
    const { rows } = await confirmSchema.pool.query(`SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint::text AS us`);
    const askedUs = BigInt((rows[0] as { us: string }).us);
    const reply = await store.acquire(60_000, 20_000);
    expect(reply).toMatchObject({ won: false, holder: null });
    // The server's own clock, from before the call to its answer: a grace period of 2.5 s, then the
    // 0.5 s left of the 3 s budget. Waiting a whole grace period again would answer after 5 s.
    const answeredUs = BigInt(reply.time.sec) * 1_000_000n + BigInt(reply.time.usec);
    const waitedMs = Number(answeredUs - askedUs) / 1000;
    expect(waitedMs).toBeGreaterThanOrEqual(3000);
    expect(waitedMs).toBeLessThan(4000);
  });
});
