import { spawnSync } from 'node:child_process';
import { redisCommand } from '../redis/redis-command.js';
import { waitForReplicaSync } from '../redis/replica-sync.js';
import { startRedisCluster, type RedisCluster } from '../redis/redis-cluster.js';
import type { RedisServerProcess } from '../redis/redis-server.js';
import { startRedisSentinel, type RedisSentinel } from '../redis/redis-sentinel.js';
import { startRedisTopology, type RedisTopology } from '../redis/redis-topology.js';
import type { RedisEndpoint } from './sim-app.js';

/** The Redis a scenario runs on. */
export type RedisKind = 'single' | 'failover' | 'cluster' | 'sentinel';

/**
 * The Redis deployment of one run, as the faults see it.
 *
 * `proxied` (single, failover): one server in use at a time, reached by every replica through its own
 * fault proxy, so a replica can be partitioned from it. `replicated` (Cluster, Sentinel): the
 * replicas connect straight to the servers, because the client follows the addresses the servers
 * announce (Cluster redirections, the primary Sentinel names), which a proxy in front would not be;
 * the faults hit the servers themselves.
 */
export type SimRedis = ProxiedRedis | ReplicatedRedis;

export interface ProxiedRedis {
  readonly kind: 'proxied';
  readonly topology: RedisTopology;
  /** Each server's log, by name (`redis-<port>`), read before `stop()` (which deletes them). */
  logs(): Record<string, string>;
  stop(): Promise<void>;
}

/** A deployment that promotes replicas on its own: Redis Cluster or Sentinel. */
export interface ReplicatedRedis {
  readonly kind: 'replicated';
  readonly topology: 'cluster' | 'sentinel';
  readonly endpoint: RedisEndpoint;
  /** How long the deployment takes to notice a silent primary (Cluster's node timeout, Sentinel's down-after). */
  readonly downAfterMs: number;
  /** The primary that serves `key` now (on Sentinel, the one primary). */
  primaryFor(key: string): Promise<RedisServerProcess>;
  /** Makes the next failover of that primary lossy: its replicas stop receiving its writes. */
  holdReplication(key: string): Promise<void>;
  /** Lets the held replicas sync again (once the held primary runs: not while it is frozen). */
  healReplication(): Promise<void>;
  /** Resolves with the new primary for `key` once a server other than `deposed` serves it. */
  waitForFailover(key: string, deposed: RedisServerProcess, timeoutMs: number): Promise<RedisServerProcess>;
  /** Each server's log, by name (`redis-<port>`, `sentinel-<port>`), read before `stop()` (which deletes them). */
  logs(): Record<string, string>;
  /**
   * Resolves once the deployment is whole: every primary serves, every other server replicates in
   * sync. A deposed primary that resumed learns of its demotion only after a while (Cluster by
   * gossip, Sentinel when a sentinel reconfigures it, 8 s or more): the window a scenario aims at.
   */
  waitUntilWhole(timeoutMs: number): Promise<void>;
  stop(): Promise<void>;
}

/** Cluster node timeout and Sentinel down-after of simulated deployments: short, so a failover fits in a run. */
const DOWN_AFTER_MS = 1000;

let installed: boolean | undefined;
/** Whether `redis-server` runs from the PATH (asked once per process). */
export function redisServerInstalled(): boolean {
  installed ??= spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
  return installed;
}

export async function startSimRedis(kind: RedisKind): Promise<SimRedis> {
  switch (kind) {
    case 'single':
    case 'failover': {
      const topology = await startRedisTopology(kind);
      return { kind: 'proxied', topology, logs: () => logsOf('redis', [topology.primary, topology.replica]), stop: () => topology.stop() };
    }
    case 'cluster':
      return clusterRedis(await startRedisCluster({ nodeTimeoutMs: DOWN_AFTER_MS }));
    case 'sentinel':
      return sentinelRedis(await startRedisSentinel({ downAfterMs: DOWN_AFTER_MS }));
  }
}

function clusterRedis(cluster: RedisCluster): ReplicatedRedis {
  const slots = new Map<string, number>();
  const slotOf = async (key: string): Promise<number> => {
    let slot = slots.get(key);
    if (slot === undefined) {
      const server = cluster.servers.find((s) => s.process !== undefined && !s.paused);
      if (server === undefined) throw new Error('no cluster node is up to ask for a key slot');
      slot = Number(await redisCommand(server.port, ['CLUSTER', 'KEYSLOT', key], 1000));
      slots.set(key, slot);
    }
    return slot;
  };
  return {
    kind: 'replicated',
    topology: 'cluster',
    endpoint: { kind: 'cluster', nodes: cluster.startupNodes },
    downAfterMs: cluster.nodeTimeoutMs,
    primaryFor: async (key) => (await cluster.shard(await slotOf(key))).primary,
    holdReplication: async (key) => cluster.holdReplication(await slotOf(key)),
    healReplication: () => cluster.healReplication(),
    waitForFailover: async (key, deposed, timeoutMs) => cluster.waitForFailover(await slotOf(key), deposed, timeoutMs),
    logs: () => logsOf('redis', cluster.servers),
    async waitUntilWhole(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      await cluster.waitUntilHealthy(timeoutMs);
      // A deposed primary that has not learned it yet shows as a primary without slots.
      for (const node of (await cluster.nodes()).filter((n) => n.role === 'replica' || n.slots.length === 0)) {
        await waitForReplicaSync(node.port, Math.max(0, deadline - Date.now()));
      }
    },
    stop: () => cluster.stop(),
  };
}

function sentinelRedis(sentinel: RedisSentinel): ReplicatedRedis {
  return {
    kind: 'replicated',
    topology: 'sentinel',
    endpoint: { kind: 'sentinel', sentinels: sentinel.sentinelNodes, name: sentinel.name },
    downAfterMs: sentinel.downAfterMs,
    primaryFor: () => sentinel.primary(),
    holdReplication: () => sentinel.holdReplication(),
    healReplication: () => sentinel.healReplication(),
    waitForFailover: (_key, deposed, timeoutMs) => sentinel.waitForFailover(deposed, timeoutMs),
    logs: () => ({ ...logsOf('redis', sentinel.servers), ...logsOf('sentinel', sentinel.sentinels) }),
    async waitUntilWhole(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      const primary = await sentinel.primary();
      for (const server of sentinel.servers.filter((s) => s !== primary)) await waitForReplicaSync(server.port, Math.max(0, deadline - Date.now()));
    },
    stop: () => sentinel.stop(),
  };
}

/** The logs of `servers`, each named `<kind>-<port>`. */
function logsOf(kind: string, servers: ReadonlyArray<RedisServerProcess | undefined>): Record<string, string> {
  return Object.fromEntries(servers.flatMap((s) => (s === undefined ? [] : [[`${kind}-${s.port}`, s.log()]])));
}
