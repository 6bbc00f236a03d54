import { startFaultProxy, type FaultProxy } from '../fault-proxy.js';
import { startRedisServer, type RedisServerProcess } from './redis-server.js';
import { redisCommand } from './redis-command.js';
import { waitForReplicaSync } from './replica-sync.js';

/**
 * The Redis servers of one run. `single`: one primary. `failover`: a primary and a replica that
 * replicates through a fault proxy, so replication can be held back before the replica is promoted
 * (asynchronous replication losing acknowledged writes, on demand).
 */
export interface RedisTopology {
  /** The server clients should use (the promoted replica after a failover). */
  readonly primary: RedisServerProcess;
  /** The server replicating from it, if any. */
  readonly replica: RedisServerProcess | undefined;
  /** The port clients should use now (the replica's once it was promoted). */
  readonly activePort: number;
  /** Stops replication traffic: writes on the primary no longer reach the replica. */
  holdReplication(): void;
  /** Promotes the replica (REPLICAOF NO ONE) and makes it the active server. */
  promoteReplica(): Promise<void>;
  /**
   * Brings the deposed primary back as a replica of the new one: restarted empty (its unreplicated
   * writes are gone, as on a real failover), replicating through the proxy, in sync before this
   * resolves. After it, replication can be held back and the replica promoted again.
   */
  rejoinAsReplica(): Promise<void>;
  /** Kills the active server and starts it again, empty (no persistence). */
  restartActive(downMs: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startRedisTopology(kind: 'single' | 'failover'): Promise<RedisTopology> {
  let primary = await startRedisServer();
  let replica: RedisServerProcess | undefined;
  let replicationProxy: FaultProxy | undefined;

  if (kind === 'failover') {
    replicationProxy = await startFaultProxy(primary.port);
    replica = await startRedisServer({ args: ['--repl-diskless-load', 'disabled'] });
    await redisCommand(replica.port, ['REPLICAOF', '127.0.0.1', String(replicationProxy.port)]);
    // Wait until the replica is in sync, or the run would start with replication already behind.
    await waitForReplicaSync(replica.port, 10_000);
  }
  return {
    get primary() {
      return primary;
    },
    get replica() {
      return replica;
    },
    get activePort() {
      return primary.port;
    },
    holdReplication() {
      replicationProxy?.setMode({ kind: 'stall' });
    },
    async promoteReplica() {
      if (replica === undefined) throw new Error('no replica to promote');
      await redisCommand(replica.port, ['REPLICAOF', 'NO', 'ONE']);
      [primary, replica] = [replica, primary];
    },
    async rejoinAsReplica() {
      if (replica === undefined || replicationProxy === undefined) throw new Error('no deposed primary to bring back');
      await replica.kill();
      replicationProxy.retarget(primary.port);
      replicationProxy.setMode({ kind: 'pass' });
      await replica.start();
      await redisCommand(replica.port, ['REPLICAOF', '127.0.0.1', String(replicationProxy.port)]);
      await waitForReplicaSync(replica.port, 10_000);
    },
    async restartActive(downMs) {
      await primary.kill();
      await new Promise((r) => setTimeout(r, downMs));
      await primary.start();
    },
    async stop() {
      await replicationProxy?.close();
      await Promise.all([primary.stop(), replica?.stop()]);
    },
  };
}
