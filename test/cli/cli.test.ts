import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startRedisServer, type RedisServerProcess } from '@fenced/chaos';
import { createGuard, type Guard } from '@fenced/consumer-guard';
import { createCoordinator, createScheduler, type Coordinator, type Scheduler } from '@fenced/coordinator';
import { createEnvelope, parseToken } from '@fenced/shared';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, createTestSchema, deleteKeys, runCli, testDatabaseUrl, testRedisUrl, uniquePrefix, waitFor } from '#test-support';

// `fenced` as operators run it: its own OS process, against the real Redis and PostgreSQL that a
// running coordinator, scheduler and guard use, asserting what it prints and how it exits.

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let redis: Redis;
let prefix: string;
let resource: string;
let guard: Guard<pg.PoolClient>;
let coordinator: Coordinator;
let scheduler: Scheduler;
let staleFire: string;
const stops: Array<() => Promise<unknown>> = [];

const connection = () => ['--redis', testRedisUrl(), '--database', testDatabaseUrl(), '--schema', schema.name, '--prefix', prefix];

beforeAll(async () => {
  schema = await createTestSchema('cli');
  redis = createRedis();
  prefix = uniquePrefix('cli');
  resource = `billing-${prefix}`;
  guard = createGuard({ db: schema.pool, redis, resource, schema: schema.name, keyPrefix: prefix });
  await guard.migrate();
  await guard.advance(5n); // used before: the first election finds the fence ahead and repairs the counter
  coordinator = createCoordinator({ redis, lease: 'billing', keyPrefix: prefix, nodeId: 'node-a', ttlMs: 3000, renewIntervalMs: 500, fences: [guard] });
  const handle = guard.wrapHandler((_payload, ctx) => ctx.guardedWrite(async () => undefined), { onStale: 'return' });
  scheduler = createScheduler({ coordinator, jobs: { invoices: { everyMs: 200, handler: (envelope) => handle(envelope) } } });
  scheduler.start();
  await coordinator.start();
  stops.push(() => coordinator.stop(), () => scheduler.stop());
  await waitFor(async () => (await guard.inspect()).fences.some((f) => f.resource === resource && f.appliedFires >= 2), 15_000);
  // A deposed leader's fire (token 3, the fence is at 6): refused by the Redis mark before it starts.
  const stale = createEnvelope({ job: 'invoices', scheduledAt: Date.UTC(2026, 11, 1, 9), token: parseToken(3n), issuer: 'node-old', payload: null });
  staleFire = stale.fireId;
  expect((await handle(stale)).status).toBe('stale');
}, 60_000);

afterAll(async () => {
  for (const stop of stops.reverse()) await stop();
  await deleteKeys(redis, prefix);
  redis.disconnect();
  await schema.drop();
});

describe('fenced status', () => {
  it('shows the leader, its token, time left and counter; the last fire per job and its lateness; the elections; per resource the fence, mark, applied fires and refused writes', async () => {
    const run = await runCli(['status', ...connection(), '--json']);
    expect(run.code, run.stderr).toBe(0);
    const status = run.json<import('@fenced/cli').Status>();
    const token = coordinator.token()!.toString();
    expect(token).toBe('6');
    const lease = status.leases.find((l) => l.lease === 'billing')!;
    expect(lease.leader).toEqual({ node: 'node-a', token });
    expect(lease.timeLeftMs).toBeGreaterThan(0);
    expect(lease.timeLeftMs).toBeLessThanOrEqual(3000);
    expect(lease.counter).toBe(token);
    expect(lease.elections[0]).toMatchObject({ node: 'node-a', token, ttlMs: 3000, fences: 1, regressed: true });
    const job = lease.jobs.find((j) => j.job === 'invoices')!;
    expect(job.latenessMs).toBeGreaterThanOrEqual(0);
    expect(Date.parse(job.dispatchedAt!)).toBeGreaterThanOrEqual(Date.parse(job.lastFire));

    const r = status.resources.find((x) => x.resource === resource)!;
    expect(r.fence).toBe(token);
    expect(r.mark).toBe(token);
    expect(r.appliedFires).toBeGreaterThanOrEqual(2);
    expect(r.lastAppliedFire!.fireId).toMatch(/^invoices@/);
    expect(r.oldestAppliedAt).not.toBeNull();
    expect(r.refusals[0]).toMatchObject({ token: '3', highest: token, via: 'redis', fireId: staleFire });

    const text = await runCli(['status', ...connection()]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/billing\s+node-a\s+6\s/);
    expect(text.stdout).toContain(staleFire);
    expect(text.stdout).toContain(resource);
  });

  it('without a database shows Redis alone and says so', async () => {
    const run = await runCli(['status', '--redis', testRedisUrl(), '--prefix', prefix], { DATABASE_URL: undefined });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('give --database to read the fences');
    expect(run.stdout).toMatch(/billing\s+node-a/);
    // An empty variable (as a .env file leaves it) counts as unset, not as a malformed URL.
    const empty = await runCli(['status', '--redis', testRedisUrl(), '--prefix', prefix], { DATABASE_URL: '' });
    expect(empty.code, empty.stderr).toBe(0);
  });
});

describe('fenced doctor', () => {
  it('passes a fenced deployment (warning about persistence, which the test Redis lacks) and exits 0', async () => {
    const run = await runCli(['doctor', ...connection(), '--json']);
    const report = run.json<import('@fenced/cli').DoctorReport>();
    const verdict = (id: string) => report.checks.find((c) => c.id === id)?.verdict;
    expect(run.code, JSON.stringify(report.checks.filter((c) => c.verdict === 'fail'))).toBe(0);
    expect(verdict('redis.eviction')).toBe('pass');
    expect(verdict('redis.persistence')).toBe('warn');
    expect(verdict('lease.fences')).toBe('pass');
    expect(verdict('postgres.migrations')).toBe('pass');
    expect(verdict('postgres.applied-fires')).toBe('pass');
    expect(verdict('clock.offset')).toBe('pass');
    // The test server keeps PostgreSQL's default: no idle_in_transaction_session_timeout backstop.
    expect(verdict('postgres.timeouts')).toBe('warn');
    expect(report.checks.find((c) => c.id === 'postgres.timeouts')?.detail).toContain('idle_in_transaction_session_timeout off');
  });

  it('reads the timeouts the guard role meets: a backstop set passes, a statement_timeout under the takeover bound warns', async () => {
    const withSettings = (settings: string) => {
      const url = new URL(testDatabaseUrl());
      url.searchParams.set('options', settings);
      return url.toString();
    };
    const run = async (settings: string) => {
      const args = connection();
      args[args.indexOf('--database') + 1] = withSettings(settings);
      const report = (await runCli(['doctor', ...args, '--json'])).json<import('@fenced/cli').DoctorReport>();
      return report.checks.find((c) => c.id === 'postgres.timeouts')!;
    };
    const backstop = await run('-c idle_in_transaction_session_timeout=60s');
    expect(backstop.verdict, backstop.detail).toBe('pass');
    expect(backstop.detail).toContain('idle_in_transaction_session_timeout 1 min');
    const short = await run('-c idle_in_transaction_session_timeout=60s -c statement_timeout=2s');
    expect(short.verdict).toBe('warn');
    expect(short.fix).toContain('takeover.timeoutMs');
  });

  it('fails a coordinator that runs without any fence, naming the lease', async () => {
    const unfenced = createCoordinator({ redis, lease: 'reports', keyPrefix: prefix, nodeId: 'node-b', ttlMs: 3000, renewIntervalMs: 500 });
    await unfenced.start();
    try {
      await waitFor(() => unfenced.isLeader(), 10_000);
      await waitFor(async () => (await redis.xlen(`${prefix}:{reports}:elections`)) > 0);
      const run = await runCli(['doctor', ...connection()]);
      expect(run.code).toBe(1);
      expect(run.stdout).toMatch(/FAIL\s+lease\.fences: the last election of reports \(elected node-b\) advanced no fence/);
      expect(run.stdout).toContain('fix: Pass the guard to the coordinator');
    } finally {
      await unfenced.stop();
      await deleteKeys(redis, `${prefix}:{reports}`);
    }
  });

  it('without a database fails (a deploy gate must not pass with PostgreSQL unchecked), unless told --no-postgres', async () => {
    const args = ['--redis', testRedisUrl(), '--prefix', prefix];
    const unchecked = await runCli(['doctor', ...args], { DATABASE_URL: undefined });
    expect(unchecked.code).toBe(1);
    expect(unchecked.stdout).toMatch(/FAIL\s+postgres\.database: no database given/);
    const told = await runCli(['doctor', ...args, '--no-postgres', '--json'], { DATABASE_URL: undefined });
    const report = told.json<import('@fenced/cli').DoctorReport>();
    expect(report.checks.filter((c) => c.id.startsWith('postgres.')).map((c) => c.verdict)).toEqual(['skip', 'skip', 'skip', 'skip']);
    expect(report.checks.some((c) => c.id === 'postgres.database')).toBe(false);
  });

  it('flags a Redis that evicts keys (allkeys-lru) and exits 1', async () => {
    let lru: RedisServerProcess | undefined;
    try {
      lru = await startRedisServer({ args: ['--maxmemory', '64mb', '--maxmemory-policy', 'allkeys-lru'] });
      const run = await runCli(['doctor', '--redis', `redis://127.0.0.1:${lru.port}`], { DATABASE_URL: undefined });
      expect(run.code).toBe(1);
      expect(run.stdout).toMatch(/FAIL\s+redis\.eviction: maxmemory-policy must be noeviction: 127\.0\.0\.1:\d+ has allkeys-lru/);
      expect(run.stdout).toContain('fix: CONFIG SET maxmemory-policy noeviction');
      expect(run.stdout).toContain('doctor: a check failed');
    } finally {
      await lru?.stop();
    }
  });

  it('fails a database the guard was never migrated on', async () => {
    const run = await runCli(['doctor', ...connection(), '--schema', `${schema.name}_none`, '--json']);
    expect(run.code).toBe(1);
    expect(run.json<import('@fenced/cli').DoctorReport>().checks.find((c) => c.id === 'postgres.migrations')).toMatchObject({ verdict: 'fail' });
  });
});

describe('what an operator gets wrong, each said plainly', () => {
  it('names DATABASE_URL (not --database) for a malformed URL from the environment', async () => {
    const run = await runCli(['status', '--redis', testRedisUrl(), '--prefix', prefix], { DATABASE_URL: 'mysql://x' });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('fenced: DATABASE_URL: expected a postgres:// URL');
  });

  it('says a database that does not exist was refused, not that PostgreSQL did not answer', async () => {
    const url = new URL(testDatabaseUrl());
    url.pathname = '/fenced_no_such_db';
    const run = await runCli(['status', '--redis', testRedisUrl(), '--database', url.toString(), '--prefix', prefix]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--database: PostgreSQL refused it: database "fenced_no_such_db" does not exist/);
  });

  it('status --serve on a port in use is a usage error naming the port, not an unreachable service', async () => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    try {
      const taken = (busy.address() as AddressInfo).port;
      const run = await runCli(['status', '--serve', '--port', String(taken), '--redis', testRedisUrl(), '--database', testDatabaseUrl(), '--schema', schema.name, '--prefix', prefix]);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(`--port ${taken}: 127.0.0.1:${taken} is in use`);
    } finally {
      busy.close();
    }
  });
});

describe('fenced fence', () => {
  it('lower refuses without an actor or reason, or upwards, and changes nothing', async () => {
    const own = `poisoned-${prefix}`;
    const g = createGuard({ db: schema.pool, redis, resource: own, schema: schema.name, keyPrefix: prefix });
    await g.advance(900n);
    const noReason = await runCli(['fence', 'lower', ...connection(), '--resource', own, '--to', '7', '--actor', 'ops@example.com']);
    expect(noReason.code).toBe(2);
    expect(noReason.stderr).toContain('fence lower needs --reason: nothing was changed');
    // Every missing flag at once, not one per try.
    const bare = await runCli(['fence', 'lower', ...connection(), '--resource', own]);
    expect(bare.code).toBe(2);
    expect(bare.stderr.trim()).toBe('fenced: fence lower needs --to, --actor, --reason: nothing was changed');
    const blank = await runCli(['fence', 'lower', ...connection(), '--resource', own, '--to', '7', '--actor', ' ', '--reason', 'x']);
    expect(blank.code).toBe(2);
    expect(blank.stderr).toContain('--actor is required and must not be blank');
    const upwards = await runCli(['fence', 'lower', ...connection(), '--resource', own, '--to', '901', '--actor', 'ops', '--reason', 'x']);
    expect(upwards.code).toBe(2);
    expect(upwards.stderr).toContain('is not below the fence (900)');
    const badToken = await runCli(['fence', 'lower', ...connection(), '--resource', own, '--to', '7.5', '--actor', 'ops', '--reason', 'x']);
    expect(badToken.code).toBe(2);
    expect(await g.highest()).toBe(900n);
    expect(await g.auditLog(own)).toEqual([]);
  });

  it('lower prints before and after, writes the audit row and resets the Redis mark; show reads it back', async () => {
    const own = `poisoned2-${prefix}`;
    const g = createGuard({ db: schema.pool, redis, resource: own, schema: schema.name, keyPrefix: prefix });
    await g.advance(900n); // a forged huge token got in
    const run = await runCli(['fence', 'lower', ...connection(), '--resource', own, '--to', '7', '--actor', 'ops@example.com', '--reason', 'forged token 900 in INC-42']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`lowered the fence of ${own}`);
    expect(run.stdout).toMatch(/before: fence 900, redis mark 900/);
    expect(run.stdout).toMatch(/after: {2}fence 7, redis mark 7/);
    expect(await g.highest()).toBe(7n);
    // The mark went down with the fence: token 7 is accepted again, on the fast path and in PostgreSQL.
    await g.guardedWrite(7n, async () => undefined);
    const [audit] = await g.auditLog(own);
    expect(audit).toMatchObject({ from: 900n, to: 7n, actor: 'ops@example.com', reason: 'forged token 900 in INC-42' });

    const shown = await runCli(['fence', 'show', ...connection(), '--resource', own, '--json']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.json()).toMatchObject({ resource: own, fence: '7', mark: '7', audit: [{ from: '900', to: '7', actor: 'ops@example.com' }] });
    const none = await runCli(['fence', 'show', ...connection(), '--resource', `absent-${prefix}`]);
    expect(none.code).toBe(1);
  });
});

describe('fenced fires prune', () => {
  it('deletes only the records older than asked', async () => {
    const before = (await guard.inspect()).appliedFires.rows;
    const keep = await runCli(['fires', 'prune', ...connection(), '--older-than', '1h']);
    expect(keep.code, keep.stderr).toBe(0);
    expect(keep.stdout).toBe('pruned 0 applied-fire record(s) older than 1h\n');
    const all = await runCli(['fires', 'prune', ...connection(), '--older-than', '0s', '--json']);
    expect(all.code, all.stderr).toBe(0);
    expect(all.json<{ deleted: number }>().deleted).toBeGreaterThanOrEqual(before);
  });
});

describe('bad input and unreachable services', () => {
  it('exits 2 on usage errors and 3 on a service that does not answer, with one line on stderr', async () => {
    const unknown = await runCli(['statuz']);
    expect(unknown.code).toBe(2);
    const malformed = await runCli(['status', '--redis', 'localhost:6379']);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toBe('fenced: --redis: expected a redis:// or rediss:// URL, got "localhost:6379"\n');
    const duration = await runCli(['fires', 'prune', '--database', testDatabaseUrl(), '--older-than', 'a week']);
    expect(duration.code).toBe(2);
    const down = await runCli(['status', '--redis', 'redis://127.0.0.1:1']);
    expect(down.code).toBe(3);
    expect(down.stderr).toMatch(/^fenced: Redis did not answer \(redis:\/\/127\.0\.0\.1:1\)/);
    const noDb = await runCli(['fires', 'prune', '--older-than', '7d'], { DATABASE_URL: undefined });
    expect(noDb.code).toBe(2);
    expect(noDb.stderr).toContain('this command needs the database');
    const help = await runCli(['doctor', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Exit codes:');
  });
});
