import { startFaultProxy, type FaultProxy } from '../proxy/fault-proxy.js';
import { startRedisServer, type RedisServerProcess } from './redis-server.js';
import { redisCommand } from './redis-command.js';

/**
 * The Redis servers of one run. `single`: one primary. `failover`: a primary and a replica that
 * replicates through a fault proxy, so replication can be held back before the replica is promoted
 * (asynchronous replication losing acknowledged writes, on demand).
 */
export interface RedisTopology {
  readonly primary: RedisServerProcess;
  readonly replica: RedisServerProcess | undefined;
  /** The port clients should use now (the replica's once it was promoted). */
  readonly activePort: number;
  /** Stops replication traffic: writes on the primary no longer reach the replica. */
  holdReplication(): void;
  /** Promotes the replica (REPLICAOF NO ONE) and makes it the active server. */
  promoteReplica(): Promise<void>;
  /** Kills the active server and starts it again, empty (no persistence). */
  restartActive(downMs: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startRedisTopology(kind: 'single' | 'failover'): Promise<RedisTopology> {
  const primary = await startRedisServer();
  let replica: RedisServerProcess | undefined;
  let replicationProxy: FaultProxy | undefined;
  let active: RedisServerProcess = primary;
  if (kind === 'failover') {
    replicationProxy = await startFaultProxy(primary.port);
    replica = await startRedisServer({ args: ['--replicaof', '127.0.0.1', String(replicationProxy.port), '--repl-diskless-load', 'disabled'] });
    // Wait until the replica is in sync, or the run would start with replication already behind.
    const deadline = Date.now() + 10_000;
    for (;;) {
      const info = await redisCommand(replica.port, ['INFO', 'replication']);
      if (/master_link_status:up/.test(String(info))) break;
      if (Date.now() > deadline) throw new Error('the Redis replica did not sync with its primary');
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    primary,
    replica,
    get activePort() {
      return active.port;
    },
    holdReplication() {
      replicationProxy?.setMode({ kind: 'stall' });
    },
    async promoteReplica() {
      if (replica === undefined) throw new Error('no replica to promote');
      await redisCommand(replica.port, ['REPLICAOF', 'NO', 'ONE']);
      active = replica;
    },
    async restartActive(downMs) {
      await active.kill();
      await new Promise((r) => setTimeout(r, downMs));
      await active.start();
    },
    async stop() {
      await replicationProxy?.close();
      await Promise.all([primary.stop(), replica?.stop()]);
    },
  };
}
