import { redisCommand, startRedisCluster, type RedisCluster, type RedisServerProcess } from '@fenced/chaos';
import { createGuard } from '@fenced/consumer-guard';
import { createRedisGuard } from '@fenced/consumer-guard/redis';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { createCoordinator, createLeaseGroup, type Coordinator, type LeaseGroup } from '@fenced/coordinator';
import { isFencedError, type FencedEvent, type Fence } from '@fenced/shared';
import { createTestSchema, uniquePrefix, waitFor } from '#test-support';
import { Cluster } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

// A real 6-node Redis Cluster (3 primaries, 3 replicas, cluster-node-timeout 2000) started for this
// file; every client is an ioredis `Cluster`, passed to the factories as it is (no cast).
let cluster: RedisCluster;
let schema: Awaited<ReturnType<typeof createTestSchema>>;
const clients: Cluster[] = [];
const coordinators: Coordinator[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster({ nodeTimeoutMs: 2000 });
  schema = await createTestSchema('cluster');
  await createPostgresGuard({ db: schema.pool, resource: 'setup', schema: schema.name }).migrate();
}, 120_000);
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await cluster?.stop();
  await schema?.drop();
});
afterEach(async () => {
  await Promise.all(coordinators.splice(0).map((c) => c.stop()));
});

function clusterClient(connectionName?: string): Cluster {
  const client = new Cluster([...cluster.startupNodes], { redisOptions: { maxRetriesPerRequest: 1, ...(connectionName === undefined ? {} : { connectionName }) } });
  client.on('error', () => {});
  clients.push(client);
  return client;
}

interface Recorded {
  readonly events: FencedEvent[];
  readonly elected: bigint[];
}

function coordinatorOn(lease: string, prefix: string, options: { fences?: Fence[]; ttlMs?: number; acquireRetryMs?: number; recorded?: Recorded } = {}): Coordinator {
  const recorded = options.recorded;
  const c = createCoordinator({
    redis: clusterClient(),
    lease,
    keyPrefix: prefix,
    ttlMs: options.ttlMs ?? 1500,
    renewIntervalMs: 300,
    acquireRetryMs: options.acquireRetryMs ?? 200,
    fences: options.fences ?? [],
    logger: (e) => recorded?.events.push(e),
  });
  if (recorded !== undefined) c.on('elected', ({ token }) => recorded.elected.push(token));
  coordinators.push(c);
  return c;
}

/** The slot of a lease's keys (they share the hash tag `{lease}`), as the cluster computes it. */
async function slotOf(lease: string): Promise<number> {
  return Number(await redisCommand(cluster.servers[0]!.port, ['CLUSTER', 'KEYSLOT', `{${lease}}`]));
}

/** Brings a killed node back: it rejoins as a replica of its shard's new primary, in sync. */
async function restore(server: RedisServerProcess): Promise<void> {
  await server.start();
  await cluster.healReplication();
  await cluster.waitUntilHealthy();
  await waitFor(async () => /master_link_status:up/.test(String(await redisCommand(server.port, ['INFO', 'replication']).catch(() => ''))), 30_000, 100);
}

const leaders = (group: readonly Coordinator[]) => group.filter((c) => c.isLeader());

describe('the coordinator on Redis Cluster', () => {
  it('elects one leader per lease, leases spread over the primaries; a graceful stop wakes a standby through pub/sub', async () => {
    const prefix = uniquePrefix('cl');
    const leases = ['a', 'b', 'c'];
    // The three hash tags land on three different primaries.
    const primaries = new Set(await Promise.all(leases.map(async (l) => (await cluster.shard(await slotOf(l))).primary.port)));
    expect(primaries.size).toBe(3);

    const recorded: Recorded = { events: [], elected: [] };
    // A standby would poll only once a minute: a handover faster than that is the release wake-up.
    const groups = leases.map((lease) => [0, 1, 2].map(() => coordinatorOn(lease, prefix, { ttlMs: 20_000, acquireRetryMs: 60_000, recorded })));
    await Promise.all(groups.flat().map((c) => c.start()));
    await waitFor(() => groups.every((g) => leaders(g).length === 1), 10_000);

    const [first] = leaders(groups[0]!);
    await first!.stop();
    await waitFor(() => leaders(groups[0]!).length === 1, 15_000);
    expect(leaders(groups[0]!)[0]).not.toBe(first);
    // Every start subscribed without ioredis's "already connecting/connected" (the Cluster's duplicate()).
    expect(recorded.events.filter((e) => e.type === 'lease-store.error')).toEqual([]);
  });

  it('a lossy primary failover under the lease: the promoted replica missed the last INCR; fenced, no token repeats; unfenced, one does', async () => {
    const prefix = uniquePrefix('cl');
    const guarded = 'lossy';
    const slot = await slotOf(guarded);
    // The control is a lease on the same slot, so one failover hits both.
    let control = '';
    for (let i = 0; control === ''; i++) if ((await slotOf(`ctl-${i}`)) === slot) control = `ctl-${i}`;

    const fence = createPostgresGuard({ db: schema.pool, resource: `cluster-${prefix}`, schema: schema.name });
    const fenced: Recorded = { events: [], elected: [] };
    const unfenced: Recorded = { events: [], elected: [] };
    const guardedGroup = [0, 1].map(() => coordinatorOn(guarded, prefix, { fences: [fence], recorded: fenced }));
    const controlGroup = [0, 1].map(() => coordinatorOn(control, prefix, { recorded: unfenced }));
    await Promise.all([...guardedGroup, ...controlGroup].map((c) => c.start()));
    await waitFor(() => leaders(guardedGroup).length === 1 && leaders(controlGroup).length === 1, 10_000);

    // From here writes on the primary never reach its replica: hand each lease on a few times, so the
    // next tokens are minted on the primary only. (A few, not one: an acquire whose reply was lost in
    // the failover can still run late on the promoted replica and mint one token there.)
    const { primary } = await cluster.shard(slot);
    await cluster.holdReplication(slot);
    for (const group of [guardedGroup, controlGroup]) {
      for (let handover = 0; handover < 4; handover++) {
        const before = leaders(group)[0]!;
        const token = before.token()!;
        await before.stop();
        await waitFor(() => group.some((c) => c !== before && c.isLeader() && c.token()! > token), 10_000);
        await before.start();
      }
    }
    // Every election from here happens on the promoted replica, whose counter is behind (the
    // coordinators may find it before this test's own view of the cluster does).
    const electedBefore = { fenced: fenced.elected.length, unfenced: unfenced.elected.length };
    await primary.kill();
    await cluster.waitForFailover(slot, primary);
    await waitFor(() => fenced.elected.length > electedBefore.fenced && unfenced.elected.length > electedBefore.unfenced && leaders(guardedGroup).length === 1, 30_000, 20);

    const increasing = (tokens: bigint[]) => tokens.every((t, i) => i === 0 || t > tokens[i - 1]!);
    expect(increasing(fenced.elected), `fenced tokens: ${fenced.elected.join(', ')}`).toBe(true);
    expect(fenced.events.some((e) => e.type === 'token.regression')).toBe(true);
    // The control proves the fault bit: without a fence, a token was handed out twice.
    expect(new Set(unfenced.elected).size, `unfenced tokens: ${unfenced.elected.join(', ')}`).toBeLessThan(unfenced.elected.length);
    await restore(primary);
  });
});

describe('a lease group on Redis Cluster', () => {
  it('shares 90 leases over three members, each over at most 3 connections per cluster node', async () => {
    const prefix = uniquePrefix('clg');
    const leases = Array.from({ length: 90 }, (_, i) => `lease-${i}`);
    const groups: LeaseGroup[] = ['m0', 'm1', 'm2'].map((name) =>
      createLeaseGroup({ redis: clusterClient(`${prefix}-${name}`), group: 'cl', leases, keyPrefix: prefix, ttlMs: 1500, renewIntervalMs: 300, nodeId: name }),
    );
    try {
      await Promise.all(groups.map((g) => g.start()));
      await waitFor(() => {
        const led = groups.map((g) => g.led());
        return new Set(led.flat()).size === 90 && led.flat().length === 90 && led.every((l) => l.length === 30);
      }, 20_000, 20);
      const total = new Map<string, number>();
      for (const server of cluster.servers) {
        const clients = String(await redisCommand(server.port, ['CLIENT', 'LIST']));
        for (const name of ['m0', 'm1', 'm2']) {
          const connections = clients.split('\n').filter((line) => line.includes(` name=${prefix}-${name} `)).length;
          expect(connections, `${name} on ${server.port}`).toBeLessThanOrEqual(3);
          total.set(name, (total.get(name) ?? 0) + connections);
        }
      }
      // Each member does talk to the cluster: at least one connection per primary.
      for (const name of ['m0', 'm1', 'm2']) expect(total.get(name)).toBeGreaterThanOrEqual(3);
    } finally {
      await Promise.all(groups.map((g) => g.stop()));
    }
  });
});

describe('the guards on Redis Cluster', () => {
  it('a guarded Redis write runs on the mark’s slot; a key from another slot is refused before anything is sent', async () => {
    const redis = clusterClient();
    const guard = createRedisGuard({ redis, resource: `invoices-${uniquePrefix('cl')}`, keyPrefix: 'fenced-test' });
    const invoice = guard.key('invoice:42');
    expect(await guard.guardedWrite(5n, [{ command: 'HSET', keys: [invoice], args: ['status', 'sent'] }])).toEqual([1]);
    const refused = await guard.guardedWrite(6n, [{ command: 'SET', keys: ['elsewhere:{x}'], args: ['v'] }]).catch((e: unknown) => e);
    expect(isFencedError(refused, 'INVALID_MUTATION') && refused.reason === 'cross-slot').toBe(true);
    // Nothing was applied: the mark did not move to 6.
    expect(await guard.highest()).toBe(5n);
    await expect(guard.guardedWrite(4n, [{ command: 'HSET', keys: [invoice], args: ['status', 'void'] }])).rejects.toSatisfy((e: unknown) => isFencedError(e, 'STALE_TOKEN'));
    expect(await redis.hget(invoice, 'status')).toBe('sent');
    await redis.del(invoice, guard.markKey);
  });

  it('the combined guard’s fast path refuses a stale token on Cluster', async () => {
    const redis = clusterClient();
    const resource = `fast-${uniquePrefix('cl')}`;
    const events: FencedEvent[] = [];
    const guard = createGuard({ db: schema.pool, redis, resource, schema: schema.name, keyPrefix: 'fenced-test', logger: (e) => events.push(e) });
    await guard.guardedWrite(7n, async () => undefined);
    await waitFor(async () => (await createRedisGuard({ redis, resource, keyPrefix: 'fenced-test' }).highest()) === 7n, 5000);
    await expect(guard.guardedWrite(6n, async () => undefined)).rejects.toSatisfy((e: unknown) => isFencedError(e, 'STALE_TOKEN'));
    expect(events).toContainEqual(expect.objectContaining({ type: 'token.rejected', via: 'redis', token: 6n }));
  });
});
