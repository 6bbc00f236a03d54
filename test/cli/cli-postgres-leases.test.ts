// `fenced status` and `fenced doctor` on the PostgreSQL lease store: no Redis at all.
import { createCoordinator, createScheduler } from '@fenced/coordinator';
import { postgresLeases } from '@fenced/coordinator/postgres';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { startPgBouncer, type PgBouncerProcess } from '@fenced/chaos';
import { createTestSchema, runCli, testDatabaseUrl, waitFor } from '#test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
const stops: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  schema = await createTestSchema('clipg');
  const guard = createPostgresGuard({ db: schema.pool, resource: 'invoices', schema: schema.name });
  await guard.migrate();
  const leases = postgresLeases({ pool: schema.pool, schema: schema.name });
  await leases.migrate();
  const coordinator = createCoordinator({ store: leases, lease: 'billing', nodeId: 'node-a', ttlMs: 5000, renewIntervalMs: 1000, fences: [guard] });
  const scheduler = createScheduler({ coordinator, jobs: { invoices: { everyMs: 200, handler: () => undefined } } });
  scheduler.start();
  await coordinator.start();
  stops.push(() => scheduler.stop(), () => coordinator.stop());
  await waitFor(async () => (await schema.pool.query(`SELECT 1 FROM "${schema.name}".fenced_fences_fires WHERE lease = 'billing' AND field = 'invoices'`)).rowCount === 1, 10_000);
});
afterAll(async () => {
  for (const stop of stops.splice(0)) await stop();
  await schema.drop();
});

// No Redis anywhere: REDIS_URL unset and no --redis.
const noRedis = { REDIS_URL: undefined, DATABASE_URL: undefined };
const args = (database = testDatabaseUrl()) => ['--lease-store', 'postgres', '--database', database, '--schema', schema.name];

describe('fenced on the PostgreSQL lease store', () => {
  it('status shows the leader, its token and time left by the server clock, the last fire of each job and the elections', async () => {
    const run = await runCli(['status', ...args(), '--json'], noRedis);
    expect(run.code, run.stderr).toBe(0);
    const status = run.json<{ leaseStore: string; leases: Array<{ lease: string; leader: { node: string; token: string } | null; timeLeftMs: number; jobs: Array<{ job: string }>; elections: Array<{ node: string; fences: number }> }>; resources: Array<{ resource: string; fence: string; mark: string | null }> }>();
    expect(status.leaseStore).toBe('postgres');
    const billing = status.leases.find((l) => l.lease === 'billing')!;
    expect(billing.leader).toMatchObject({ node: 'node-a' });
    expect(billing.timeLeftMs).toBeGreaterThan(0);
    expect(billing.timeLeftMs).toBeLessThanOrEqual(5000);
    expect(billing.jobs.map((j) => j.job)).toEqual(['invoices']);
    expect(billing.elections[0]).toMatchObject({ node: 'node-a', fences: 1 });
    expect(status.resources).toContainEqual(expect.objectContaining({ resource: 'invoices', fence: billing.leader!.token, mark: null }));
    const text = await runCli(['status', ...args()], noRedis);
    expect(text.stdout).toContain('leases in PostgreSQL (database server clock)');
    expect(text.stdout).toContain('node-a');
  });

  it('status lists the elections newest first by token as a number (token 10 above 9), not as text (a regression)', async () => {
    // Elections with tokens past one digit, as a lease that has run a while has.
    for (const token of [8, 9, 10, 11]) {
      await schema.pool.query(`INSERT INTO "${schema.name}".fenced_fences_elections (lease, token, node, ttl_ms, fences, regressed, at) VALUES ('billing', $1, 'node-z', 5000, 1, false, now() - make_interval(mins => $2))`, [token, 20 - token]);
    }
    const run = await runCli(['status', ...args(), '--json', '--history', '3'], noRedis);
    expect(run.code, run.stderr).toBe(0);
    const billing = run.json<{ leases: Array<{ lease: string; elections: Array<{ token: string }> }> }>().leases.find((l) => l.lease === 'billing')!;
    expect(billing.elections.map((e) => e.token)).toEqual(['11', '10', '9']);
  });

  it('doctor checks the lease store: migrations, durability, replication, timeouts, LISTEN, clock', async () => {
    const run = await runCli(['doctor', ...args(), '--json'], noRedis);
    const report = run.json<{ ok: boolean; checks: Array<{ id: string; verdict: string; detail: string }> }>();
    const verdict = (id: string) => report.checks.find((c) => c.id === id)?.verdict;
    expect(verdict('leases.migrations')).toBe('pass');
    expect(verdict('leases.listen')).toBe('pass');
    expect(verdict('leases.clock')).toBe('pass');
    expect(verdict('leases.replication')).toBe('pass');
    expect(['pass', 'warn']).toContain(verdict('leases.durability'));
    expect(['pass', 'warn']).toContain(verdict('leases.idle-timeout'));
    expect(verdict('redis.eviction')).toBe('skip');
    expect(verdict('postgres.migrations')).toBe('pass');
    expect(run.code).toBe(report.ok ? 0 : 1);
  });

  it('doctor through PgBouncer in transaction mode warns that LISTEN does not work there', async () => {
    const bouncer: PgBouncerProcess = await startPgBouncer({ upstream: testDatabaseUrl(), poolMode: 'transaction' });
    try {
      const run = await runCli(['doctor', ...args(bouncer.url), '--json'], noRedis);
      const listen = run.json<{ checks: Array<{ id: string; verdict: string; detail: string }> }>().checks.find((c) => c.id === 'leases.listen');
      expect(listen).toMatchObject({ verdict: 'warn', detail: expect.stringContaining('pooler in transaction mode') });
    } finally {
      await bouncer.stop();
    }
  });

  it('a lease store never migrated fails its check, with the fix', async () => {
    const bare = await createTestSchema('clipg_bare');
    try {
      await createPostgresGuard({ db: bare.pool, resource: 'x', schema: bare.name }).migrate();
      const run = await runCli(['doctor', '--lease-store', 'postgres', '--database', testDatabaseUrl(), '--schema', bare.name, '--json'], noRedis);
      const check = run.json<{ checks: Array<{ id: string; verdict: string; detail: string }> }>().checks.find((c) => c.id === 'leases.migrations');
      expect(check).toMatchObject({ verdict: 'fail', detail: expect.stringContaining('not migrated') });
      expect(run.code).toBe(1);
    } finally {
      await bare.drop();
    }
  });
});
