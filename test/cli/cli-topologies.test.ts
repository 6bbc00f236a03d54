import { startRedisCluster, startRedisSentinel, type RedisCluster, type RedisSentinel } from '@fenced/chaos';
import { createGuard } from '@fenced/consumer-guard';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { createCoordinator, createScheduler } from '@fenced/coordinator';
import type { DoctorReport, Status } from '@fenced/cli';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestSchema, runCli, testDatabaseUrl, uniquePrefix, waitFor } from '#test-support';

// `fenced status`, `doctor` and `fence lower` against the deployments the coordinator runs on besides
// a single server: a real Redis Cluster (3 primaries, 3 replicas) and a real Sentinel deployment.

let schema: Awaited<ReturnType<typeof createTestSchema>>;
const stops: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  schema = await createTestSchema('clitopo');
  await createPostgresGuard({ db: schema.pool, resource: 'setup', schema: schema.name }).migrate();
}, 60_000);
afterAll(async () => {
  for (const stop of stops.reverse()) await stop().catch(() => {});
  await schema.drop();
});

const nodes = (list: readonly { host: string; port: number }[]) => list.map((n) => `${n.host}:${n.port}`).join(',');

/** A fenced lease with a scheduler and a guard on `redis`, leading and applying fires. */
async function deployment(redis: Redis | Cluster, prefix: string) {
  const resource = `billing-${prefix}`;
  const guard = createGuard({ db: schema.pool, redis, resource, schema: schema.name, keyPrefix: prefix });
  const coordinator = createCoordinator({ redis, lease: 'billing', keyPrefix: prefix, nodeId: 'node-a', ttlMs: 3000, renewIntervalMs: 300, fences: [guard] });
  const handle = guard.wrapHandler((_payload, ctx) => ctx.guardedWrite(async () => undefined));
  const scheduler = createScheduler({ coordinator, jobs: { invoices: { everyMs: 200, handler: (envelope) => handle(envelope) } } });
  scheduler.start();
  await coordinator.start();
  stops.push(() => coordinator.stop(), () => scheduler.stop());
  await waitFor(async () => (await guard.inspect()).fences.some((f) => f.resource === resource && f.appliedFires >= 1), 20_000);
  return { resource, guard, coordinator };
}

describe('on Redis Cluster', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  let prefix: string;
  let deployed: Awaited<ReturnType<typeof deployment>>;
  beforeAll(async () => {
    cluster = await startRedisCluster({ nodeTimeoutMs: 2000 });
    stops.push(() => cluster.stop());
    client = new Cluster([...cluster.startupNodes], { redisOptions: { maxRetriesPerRequest: 1 } });
    client.on('error', () => {});
    stops.push(async () => client.disconnect());
    prefix = uniquePrefix('clicl');
    deployed = await deployment(client, prefix);
  }, 120_000);

  it('status finds the lease on whichever primary serves its slot, with its leader, jobs and resource', async () => {
    const run = await runCli(['status', '--cluster', nodes(cluster.startupNodes), '--database', testDatabaseUrl(), '--schema', schema.name, '--prefix', prefix, '--json']);
    expect(run.code, run.stderr).toBe(0);
    const status = run.json<Status>();
    const lease = status.leases.find((l) => l.lease === 'billing')!;
    expect(lease.leader).toEqual({ node: 'node-a', token: deployed.coordinator.token()!.toString() });
    expect(lease.jobs.map((j) => j.job)).toEqual(['invoices']);
    expect(status.resources.find((r) => r.resource === deployed.resource)).toMatchObject({ fence: lease.leader!.token, mark: lease.leader!.token });
  });

  it('doctor checks every primary and the slot of every key a guard or lease uses', async () => {
    const run = await runCli(['doctor', '--cluster', nodes(cluster.startupNodes), '--database', testDatabaseUrl(), '--schema', schema.name, '--prefix', prefix, '--json']);
    const report = run.json<DoctorReport>();
    expect(run.code, JSON.stringify(report.checks.filter((c) => c.verdict === 'fail'))).toBe(0);
    const check = (id: string) => report.checks.find((c) => c.id === id)!;
    expect(check('redis.cluster-slots')).toMatchObject({ verdict: 'pass' });
    expect(check('redis.cluster-slots').detail).toContain('1 lease(s) and 1 resource(s)');
    // Three primaries, each with a replica and min-replicas-to-write 0: asynchronous replication.
    expect(check('redis.replication')).toMatchObject({ verdict: 'warn' });
    expect(check('redis.replication').detail.match(/1 replica\(s\)/g)).toHaveLength(3);
  });

  it('fence lower resets the mark on the primary of its slot', async () => {
    const own = `poisoned-${prefix}`;
    const g = createGuard({ db: schema.pool, redis: client, resource: own, schema: schema.name, keyPrefix: prefix });
    await g.advance(500n);
    const run = await runCli(['fence', 'lower', '--cluster', nodes(cluster.startupNodes), '--database', testDatabaseUrl(), '--schema', schema.name, '--prefix', prefix, '--resource', own, '--to', '3', '--actor', 'ops', '--reason', 'test', '--json']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.json()).toMatchObject({ before: { fence: '500', mark: '500' }, after: { fence: '3', mark: '3' } });
    await g.guardedWrite(3n, async () => undefined);
  });
});

describe('on Redis Sentinel', () => {
  let sentinel: RedisSentinel;
  let prefix: string;
  beforeAll(async () => {
    sentinel = await startRedisSentinel({ downAfterMs: 1000 });
    stops.push(() => sentinel.stop());
    const client = new Redis({ sentinels: [...sentinel.sentinelNodes], name: sentinel.name, failoverDetector: true, maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    stops.push(async () => client.disconnect());
    prefix = uniquePrefix('clisen');
    await deployment(client, prefix);
  }, 120_000);

  it('status and doctor go through the sentinels to the primary they name', async () => {
    const args = ['--sentinels', nodes(sentinel.sentinelNodes), '--sentinel-name', sentinel.name, '--database', testDatabaseUrl(), '--schema', schema.name, '--prefix', prefix, '--json'];
    const status = await runCli(['status', ...args]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.json<Status>().leases.find((l) => l.lease === 'billing')?.leader?.node).toBe('node-a');
    const doctor = await runCli(['doctor', ...args]);
    const report = doctor.json<DoctorReport>();
    expect(doctor.code, JSON.stringify(report.checks.filter((c) => c.verdict === 'fail'))).toBe(0);
    const check = report.checks.find((c) => c.id === 'redis.sentinel')!;
    expect(check.verdict).toBe('pass');
    expect(check.detail).toMatch(/3 of 3 sentinels name 127\.0\.0\.1:\d+ as the primary of fenced; down-after-milliseconds 1000/);
  });
});
