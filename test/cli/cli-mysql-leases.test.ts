// `fenced status` and `fenced doctor` on the MySQL/MariaDB lease store: leases, fences and the
// scheduler's record in one MariaDB database, no Redis at all.
import { createCoordinator, createScheduler } from '@fenced/coordinator';
import { mysqlLeases } from '@fenced/coordinator/mysql';
import { createMysqlGuard } from '@fenced/consumer-guard/mysql';
import { createTestMysqlDatabase, runCli, testMysqlUrl, waitFor } from '#test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;
let url: string;
const stops: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  db = await createTestMysqlDatabase('cli_mylease');
  const u = new URL(testMysqlUrl());
  u.pathname = `/${db.name}`;
  url = u.toString();
  const guard = createMysqlGuard({ db: db.pool, resource: 'invoices' });
  await guard.migrate();
  const leases = mysqlLeases({ pool: db.pool });
  await leases.migrate();
  const coordinator = createCoordinator({ store: leases, lease: 'billing', nodeId: 'node-a', ttlMs: 5000, renewIntervalMs: 1000, fences: [guard] });
  const scheduler = createScheduler({ coordinator, jobs: { invoices: { everyMs: 200, handler: () => undefined } } });
  scheduler.start();
  await coordinator.start();
  stops.push(() => scheduler.stop(), () => coordinator.stop());
  await waitFor(async () => ((await db.pool.query(`SELECT 1 FROM fenced_fences_fires WHERE lease = 'billing' AND field = 'invoices'`))[0] as unknown[]).length === 1, 10_000);
});
afterAll(async () => {
  for (const stop of stops.splice(0)) await stop();
  await db.drop();
});

// No Redis and no PostgreSQL anywhere.
const nothingElse = { REDIS_URL: undefined, DATABASE_URL: undefined, MYSQL_URL: undefined };
const args = () => ['--lease-store', 'mysql', '--mysql', url];

describe('fenced on the MySQL lease store', () => {
  it('status shows the leader, its token and time left by the server clock, the last fire of each job, the elections and the fence', async () => {
    const run = await runCli(['status', ...args(), '--json'], nothingElse);
    expect(run.code, run.stderr).toBe(0);
    const status = run.json<{ leaseStore: string; leases: Array<{ lease: string; leader: { node: string; token: string } | null; timeLeftMs: number; jobs: Array<{ job: string }>; elections: Array<{ node: string; fences: number; token: string }> }>; resources: Array<{ resource: string; fence: string; mark: string | null }> }>();
    expect(status.leaseStore).toBe('mysql');
    const billing = status.leases.find((l) => l.lease === 'billing')!;
    expect(billing.leader).toMatchObject({ node: 'node-a' });
    expect(billing.timeLeftMs).toBeGreaterThan(0);
    expect(billing.timeLeftMs).toBeLessThanOrEqual(5000);
    expect(billing.jobs.map((j) => j.job)).toEqual(['invoices']);
    expect(billing.elections[0]).toMatchObject({ node: 'node-a', fences: 1, token: billing.leader!.token });
    expect(status.resources).toContainEqual(expect.objectContaining({ resource: 'invoices', fence: billing.leader!.token, mark: null }));
    const text = await runCli(['status', ...args()], nothingElse);
    expect(text.stdout).toContain('leases in MySQL/MariaDB (database server clock)');
    expect(text.stdout).toContain('node-a');
  });

  it('status lists the elections newest first by token as a number (token 10 above 9), not as text', async () => {
    for (const token of [8, 9, 10, 11]) {
      await db.pool.query(`INSERT INTO fenced_fences_elections (lease, token, node, ttl_ms, fences, regressed, at_us) VALUES ('billing', ?, 'node-z', 5000, 1, false, ?)`, [token, (Date.now() - (20 - token) * 60_000) * 1000]);
    }
    const run = await runCli(['status', ...args(), '--json', '--history', '3'], nothingElse);
    expect(run.code, run.stderr).toBe(0);
    const billing = run.json<{ leases: Array<{ lease: string; elections: Array<{ token: string }> }> }>().leases.find((l) => l.lease === 'billing')!;
    expect(billing.elections.map((e) => e.token)).toEqual(['11', '10', '9']);
  });

  it("doctor checks the lease store (migrations, durability, fences) and the guard's MySQL side, with no PostgreSQL check", async () => {
    const run = await runCli(['doctor', ...args(), '--json'], nothingElse);
    const report = run.json<{ ok: boolean; checks: Array<{ id: string; verdict: string; detail: string }> }>();
    const check = (id: string) => report.checks.find((c) => c.id === id);
    expect(check('leases.migrations')).toMatchObject({ verdict: 'pass' });
    const [rows] = await db.pool.query('SELECT @@GLOBAL.innodb_flush_log_at_trx_commit AS flush');
    const flush = Number((rows as Array<{ flush: number }>)[0]!.flush);
    // The unit project's private MariaDB flushes once a second: the doctor must say so.
    expect(check('leases.durability')).toMatchObject(flush === 1 ? { verdict: 'pass' } : { verdict: 'warn', detail: expect.stringContaining(`innodb_flush_log_at_trx_commit is ${flush}`) });
    expect(check('mysql.migrations')).toMatchObject({ verdict: 'pass' });
    expect(check('redis.eviction')?.verdict).toBe('skip');
    expect(report.checks.some((c) => c.id.startsWith('postgres.'))).toBe(false);
    expect(run.code).toBe(report.ok ? 0 : 1);
  });

  it('doctor says what is missing on a database the lease store was never migrated in', async () => {
    const empty = await createTestMysqlDatabase('cli_mylease_empty');
    try {
      const u = new URL(testMysqlUrl());
      u.pathname = `/${empty.name}`;
      const run = await runCli(['doctor', '--lease-store', 'mysql', '--mysql', u.toString(), '--json'], nothingElse);
      const report = run.json<{ ok: boolean; checks: Array<{ id: string; verdict: string; detail: string }> }>();
      expect(report.checks.find((c) => c.id === 'leases.migrations')).toMatchObject({ verdict: 'fail', detail: expect.stringContaining('not migrated') });
      expect(run.code).toBe(1);
    } finally {
      await empty.drop();
    }
  });

  it('--lease-store mysql without a MySQL database is a usage error naming what to give', async () => {
    const run = await runCli(['status', '--lease-store', 'mysql'], nothingElse);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--mysql');
  });
});
