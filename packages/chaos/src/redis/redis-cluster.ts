import { spawn } from 'node:child_process';
import { redisCommand } from './redis-command.js';
import { freePort } from '../ports.js';
import { startRedisServer, type RedisServerProcess } from './redis-server.js';
import { holdReplicationOn, releaseReplicationOn } from './replication-fault.js';
import { replicaInSync } from './replica-sync.js';

/** One node of a Redis Cluster, as `CLUSTER NODES` reports it. */
export interface ClusterNodeInfo {
  readonly id: string;
  readonly port: number;
  readonly role: 'primary' | 'replica';
  /** The primary's id, for a replica. */
  readonly primaryId: string | undefined;
  /** Slot ranges served, for a primary. */
  readonly slots: readonly (readonly [number, number])[];
  /** Whether the cluster marks it failing. */
  readonly failing: boolean;
}

/**
 * A real Redis Cluster on loopback: 3 primaries and 3 replicas (`--cluster-enabled yes`), created
 * with `redis-cli --cluster create`. Its nodes are supervised processes (SIGKILL, SIGSTOP, restart);
 * the cluster fails over on its own after `cluster-node-timeout`.
 */
export interface RedisCluster {
  readonly servers: readonly RedisServerProcess[];
  /** Where clients start (`new Cluster(startupNodes)`). */
  readonly startupNodes: readonly { readonly host: string; readonly port: number }[];
  readonly nodeTimeoutMs: number;
  /** The cluster's view, asked of a node that answers. */
  nodes(): Promise<ClusterNodeInfo[]>;
  /** The server that is primary for `slot` now, and one of its replicas. */
  shard(slot: number): Promise<{ primary: RedisServerProcess; replica: RedisServerProcess | undefined }>;
  /**
   * Makes the next failover of the shard of `slot` lossy: its primary refuses its replica, so writes
   * on the primary from now on never reach it. A later failover promotes a replica that missed them.
   * `healReplication` undoes it, once that server runs again (not while it is frozen).
   */
  holdReplication(slot: number): Promise<void>;
  healReplication(): Promise<void>;
  /** Resolves once every slot is served by a primary the cluster sees as healthy (`cluster_state:ok` everywhere). */
  waitUntilHealthy(timeoutMs?: number): Promise<void>;
  /** Resolves with the new primary once a server other than `deposed` serves `slot`. */
  waitForFailover(slot: number, deposed: RedisServerProcess, timeoutMs?: number): Promise<RedisServerProcess>;
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /** @defaultValue `2000` */
  readonly nodeTimeoutMs?: number;
}

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 2000;
  const servers: RedisServerProcess[] = [];
  const held: RedisServerProcess[] = [];
  try {
    for (let i = 0; i < 6; i++) {
      // The cluster bus gets a free port of its own: by default it is the node's port + 10000, which
      // nothing reserved (another node's port, or an outgoing connection's, may hold it).
      const busPort = await freePort();
      servers.push(
        await startRedisServer({
          args: ['--cluster-enabled', 'yes', '--cluster-port', String(busPort), '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', String(nodeTimeoutMs), '--repl-diskless-load', 'disabled'],
        }),
      );
    }
    await createCluster(servers.map((s) => s.port));
  } catch (error) {
    await Promise.all(servers.map((s) => s.stop()));
    throw error;
  }

  const answering = () => servers.filter((s) => s.process !== undefined && !s.paused);
  const cluster: RedisCluster = {
    servers,
    startupNodes: servers.map((s) => ({ host: '127.0.0.1', port: s.port })),
    nodeTimeoutMs,
    async nodes() {
      let lastError: unknown;
      for (const server of answering()) {
        try {
          return parseClusterNodes(String(await redisCommand(server.port, ['CLUSTER', 'NODES'], 1000)));
        } catch (error) {
          lastError = error;
        }
      }
      throw new Error(`no cluster node answers CLUSTER NODES: ${String(lastError)}`);
    },
    async shard(slot) {
      const nodes = await cluster.nodes();
      const primary = nodes.find((n) => n.role === 'primary' && !n.failing && n.slots.some(([a, b]) => slot >= a && slot <= b));
      if (primary === undefined) throw new Error(`no healthy primary serves slot ${slot}`);
      const replica = nodes.find((n) => n.role === 'replica' && n.primaryId === primary.id && !n.failing);
      const server = (port: number) => servers.find((s) => s.port === port)!;
      return { primary: server(primary.port), replica: replica === undefined ? undefined : server(replica.port) };
    },
    async holdReplication(slot) {
      const { primary, replica } = await cluster.shard(slot);
      if (replica === undefined) throw new Error(`slot ${slot} has no replica to hold back`);
      held.push(primary);
      await holdReplicationOn(primary.port);
    },
    async healReplication() {
      for (const primary of held.splice(0)) if (primary.process !== undefined) await releaseReplicationOn(primary.port);
    },
    async waitUntilHealthy(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const states = await Promise.all(answering().map((s) => redisCommand(s.port, ['CLUSTER', 'INFO'], 1000).catch(() => '')));
        if (states.length > 0 && states.every((info) => /cluster_state:ok/.test(String(info)))) return;
        if (Date.now() > deadline) throw new Error(`the cluster is not healthy after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async waitForFailover(slot, deposed, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const primary = await cluster.shard(slot).then((s) => s.primary, () => undefined);
        if (primary !== undefined && primary !== deposed) return primary;
        if (Date.now() > deadline) throw new Error(`slot ${slot} did not fail over within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      await Promise.all(servers.map((s) => s.stop()));
    },
  };
  try {
    await cluster.waitUntilHealthy();
    // `cluster_state:ok` comes as soon as the primaries cover the slots; the replicas attach after.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const replicas = (await cluster.nodes()).filter((n) => n.role === 'replica');
      if (replicas.length === 3 && (await Promise.all(replicas.map((n) => replicaInSync(n.port)))).every(Boolean)) break;
      if (Date.now() > deadline) throw new Error('the cluster replicas did not attach and sync within 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (error) {
    await cluster.stop();
    throw error;
  }
  return cluster;
}

/** `redis-cli --cluster create … --cluster-replicas 1`: slots spread over three primaries, one replica each. */
function createCluster(ports: readonly number[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const cli = spawn('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    cli.stdout.on('data', (d: Buffer) => (output += d.toString()));
    cli.stderr.on('data', (d: Buffer) => (output += d.toString()));
    cli.once('error', (err) => reject(new Error(`cannot run redis-cli: ${err.message}`)));
    cli.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`redis-cli --cluster create failed (${code}): ${output.slice(-500)}`))));
  });
}

/** Parses `CLUSTER NODES`: `<id> <ip:port@bus> <flags> <primary> <ping> <pong> <epoch> <link> <slot>…`. */
export function parseClusterNodes(text: string): ClusterNodeInfo[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [id, address, flags, primary, , , , , ...slots] = line.trim().split(' ');
      const flagSet = new Set(flags!.split(','));
      return {
        id: id!,
        port: Number(address!.split('@')[0]!.split(':').at(-1)),
        role: flagSet.has('master') ? 'primary' : 'replica',
        primaryId: primary === '-' ? undefined : primary,
        slots: slots
          .filter((s) => !s.startsWith('['))
          .map((s) => {
            const [a, b] = s.split('-').map(Number);
            return [a!, b ?? a!] as const;
          }),
        failing: flagSet.has('fail') || flagSet.has('fail?'),
      } satisfies ClusterNodeInfo;
    });
}
