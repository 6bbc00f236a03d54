// `fenced status` and `fenced doctor` on the etcd lease store: the run's three-member cluster, the
// fences in PostgreSQL, no Redis.
import { createCoordinator, createScheduler } from '@fenced/coordinator';
import { etcdLeases } from '@fenced/coordinator/etcd';
import { postgresClock } from '@fenced/coordinator/postgres';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { createEtcdClient, createTestSchema, deleteEtcdPrefix, runCli, testDatabaseUrl, testEtcdEndpoints, uniqueEtcdPrefix, waitFor } from '#test-support';
import type { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let client: Etcd3;
const prefix = uniqueEtcdPrefix('cli');
const stops: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  schema = await createTestSchema('clietcd');
  client = createEtcdClient();
  const guard = createPostgresGuard({ db: schema.pool, resource: 'invoices', schema: schema.name });
  await guard.migrate();
  const coordinator = createCoordinator({ store: etcdLeases({ client, prefix, clock: postgresClock(schema.pool) }), lease: 'billing', nodeId: 'node-a', ttlMs: 3000, renewIntervalMs: 1000, fences: [guard] });
  const scheduler = createScheduler({ coordinator, jobs: { invoices: { everyMs: 200, handler: () => undefined } } });
  scheduler.start();
  await coordinator.start();
  stops.push(() => scheduler.stop(), () => coordinator.stop());
  await waitFor(async () => (await coordinator.fireLog().load())['invoices'] !== undefined, 10_000);
});
afterAll(async () => {
  for (const stop of stops.splice(0)) await stop();
  await deleteEtcdPrefix(client, prefix);
  client.close();
  await schema.drop();
});

const noRedis = { REDIS_URL: undefined, DATABASE_URL: undefined, ETCD_ENDPOINTS: undefined };
const args = () => ['--lease-store', 'etcd', '--etcd', testEtcdEndpoints().join(','), '--etcd-prefix', prefix, '--database', testDatabaseUrl(), '--schema', schema.name];

describe('fenced on the etcd lease store', () => {
  it('status shows the leader, its token and time left, the last fire of each job and the elections', async () => {
    const run = await runCli(['status', ...args(), '--json'], noRedis);
    const status = run.json<{ leaseStore: string; leases: Array<{ lease: string; leader: { node: string; token: string } | null; timeLeftMs: number; jobs: Array<{ job: string }>; elections: Array<{ node: string; fences: number }> }>; resources: Array<{ resource: string; fence: string }> }>();
    expect(status.leaseStore).toBe('etcd');
    const billing = status.leases.find((l) => l.lease === 'billing')!;
    expect(billing.leader?.node).toBe('node-a');
    expect(billing.timeLeftMs).toBeGreaterThan(0);
    expect(billing.jobs.map((j) => j.job)).toEqual(['invoices']);
    expect(billing.elections[0]).toMatchObject({ node: 'node-a', fences: 1 });
    expect(status.resources).toContainEqual(expect.objectContaining({ resource: 'invoices', fence: billing.leader!.token }));
    const text = await runCli(['status', ...args()], noRedis);
    expect(text.stdout).toContain('leases in etcd');
  });

  it('doctor checks the cluster: members, leader and quorum, TTL against the election timeout, the clock offset', async () => {
    const run = await runCli(['doctor', ...args(), '--json'], noRedis);
    const report = run.json<{ ok: boolean; checks: Array<{ id: string; verdict: string; detail: string }> }>();
    const check = (id: string) => report.checks.find((c) => c.id === id);
    expect(check('etcd.cluster')).toMatchObject({ verdict: 'pass', detail: expect.stringMatching(/3 voting members .*leader at raft term \d+/) });
    expect(check('etcd.members')?.verdict).toBe('pass');
    // The coordinator asked for 3000 ms: at least the 2 s etcd grants with its default election timeout.
    expect(check('etcd.ttl')?.verdict).toBe('pass');
    expect(check('etcd.clock')).toMatchObject({ verdict: 'pass', detail: expect.stringMatching(/this host's clock is \d+ ms/) });
    expect(check('redis.eviction')?.verdict).toBe('skip');
    expect(run.code).toBe(report.ok ? 0 : 1);
  });

  it('without endpoints: one line naming the fix, exit 2; an unreachable cluster: exit 3', async () => {
    const missing = await runCli(['status', '--lease-store', 'etcd'], noRedis);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--lease-store etcd needs the cluster: give --etcd/);
    const down = await runCli(['status', '--lease-store', 'etcd', '--etcd', 'http://127.0.0.1:9'], noRedis);
    expect(down.code).toBe(3);
    expect(down.stderr).toMatch(/etcd did not answer \(--etcd\)/);
  });
});
