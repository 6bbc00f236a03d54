import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { redisCommand } from './redis-command.js';
import { freePort } from '../ports.js';
import { startRedisServer, type RedisServerProcess } from './redis-server.js';
import { holdReplicationOn, releaseReplicationOn } from './replication-fault.js';
import { waitForReplicaSync } from './replica-sync.js';

/**
 * A real Sentinel deployment on loopback: a primary, two replicas and three sentinels
 * (`redis-server --sentinel`, quorum 2). Its servers are supervised processes (SIGKILL, SIGSTOP,
 * restart); the sentinels fail over on their own once the primary is down for `downAfterMs`.
 */
export interface RedisSentinel {
  /** The monitored primary's name, for `new Redis({ sentinels, name })`. */
  readonly name: string;
  readonly servers: readonly RedisServerProcess[];
  readonly sentinels: readonly RedisServerProcess[];
  /** Where clients find the sentinels. */
  readonly sentinelNodes: readonly { readonly host: string; readonly port: number }[];
  readonly downAfterMs: number;
  /** The server the sentinels name as primary now. */
  primary(): Promise<RedisServerProcess>;
  /**
   * Makes the next failover lossy: the primary refuses its replicas, so writes on it from now on
   * reach neither. `healReplication` undoes it, once that server runs again (not while it is frozen).
   */
  holdReplication(): Promise<void>;
  healReplication(): Promise<void>;
  /** Resolves with the new primary once the sentinels name a server other than `deposed`. */
  waitForFailover(deposed: RedisServerProcess, timeoutMs?: number): Promise<RedisServerProcess>;
  stop(): Promise<void>;
}

export interface RedisSentinelOptions {
  /** @defaultValue `'fenced'` */
  readonly name?: string;
  /** Sentinel's `down-after-milliseconds`. @defaultValue `1000` */
  readonly downAfterMs?: number;
}

export async function startRedisSentinel(options: RedisSentinelOptions = {}): Promise<RedisSentinel> {
  const name = options.name ?? 'fenced';
  const downAfterMs = options.downAfterMs ?? 1000;
  const configs = mkdtempSync(join(tmpdir(), 'fenced-sentinel-'));
  const servers: RedisServerProcess[] = [];
  const sentinels: RedisServerProcess[] = [];
  const stopAll = async () => {
    await Promise.all([...sentinels, ...servers].map((s) => s.stop()));
    rmSync(configs, { recursive: true, force: true });
  };
  try {
    const primary = await startRedisServer();
    servers.push(primary);
    for (let i = 0; i < 2; i++) {
      servers.push(await startRedisServer({ args: ['--replicaof', '127.0.0.1', String(primary.port), '--repl-diskless-load', 'disabled'] }));
    }
    for (const replica of servers.slice(1)) await waitForReplicaSync(replica.port, 10_000);
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      // Sentinels rewrite their config file (what they learn of replicas and peers), so each has one.
      const file = join(configs, `sentinel-${port}.conf`);
      writeFileSync(
        file,
        [
          `sentinel monitor ${name} 127.0.0.1 ${primary.port} 2`,
          `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
          `sentinel failover-timeout ${name} ${Math.max(3000, downAfterMs * 3)}`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      sentinels.push(await startRedisServer({ port, configFile: file, sentinel: true }));
    }
    // Until every sentinel has found its peers, a failover cannot reach the quorum.
    const deadline = Date.now() + 30_000;
    while (!(await Promise.all(sentinels.map((s) => knowsPeers(s.port, name)))).every(Boolean)) {
      if (Date.now() > deadline) throw new Error('the sentinels did not discover each other within 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (error) {
    await stopAll();
    throw error;
  }

  const held: RedisServerProcess[] = [];
  const topology: RedisSentinel = {
    name,
    servers,
    sentinels,
    sentinelNodes: sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })),
    downAfterMs,
    async primary() {
      for (const sentinel of sentinels) {
        const port = await primaryPort(sentinel.port, name).catch(() => undefined);
        const server = servers.find((s) => s.port === port);
        if (server !== undefined) return server;
      }
      throw new Error('no sentinel names a primary');
    },
    async holdReplication() {
      const primary = await topology.primary();
      held.push(primary);
      await holdReplicationOn(primary.port);
    },
    async healReplication() {
      for (const primary of held.splice(0)) if (primary.process !== undefined) await releaseReplicationOn(primary.port);
    },
    async waitForFailover(deposed, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const primary = await topology.primary().catch(() => undefined);
        if (primary !== undefined && primary !== deposed) return primary;
        if (Date.now() > deadline) throw new Error(`the sentinels did not fail over within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    stop: stopAll,
  };
  return topology;
}

/** The port of the primary a sentinel names (`SENTINEL get-master-addr-by-name` answers an array). */
async function primaryPort(sentinelPort: number, name: string): Promise<number> {
  const info = String(await redisCommand(sentinelPort, ['INFO', 'sentinel'], 1000));
  const match = new RegExp(`name=${name},status=\\w+,address=[^:]+:(\\d+)`).exec(info);
  if (match === null) throw new Error(`sentinel on ${sentinelPort} does not monitor ${name}`);
  return Number(match[1]);
}

async function knowsPeers(sentinelPort: number, name: string): Promise<boolean> {
  const info = String(await redisCommand(sentinelPort, ['INFO', 'sentinel'], 1000).catch(() => ''));
  return new RegExp(`name=${name},status=ok,address=[^,]+,slaves=2,sentinels=3`).test(info);
}
