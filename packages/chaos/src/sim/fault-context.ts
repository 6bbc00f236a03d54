import type { PostgresServerProcess } from '../postgres/postgres-server.js';
import type { PostgresCluster } from '../postgres/postgres-cluster.js';
import type { EtcdCluster } from '../etcd/etcd-cluster.js';
import { renameSync, writeFileSync } from 'node:fs';
import { clockStepText } from '../faketime.js';
import type { History, HistoryEvent } from '../history.js';
import type { ManagedProcess, ProcessLine } from '../process/managed-process.js';
import type { FaultProxy, ProxyMode } from '../fault-proxy.js';
import type { RedisTopology } from '../redis/redis-topology.js';
import type { ReplicatedRedis, SimRedis } from './sim-redis.js';
import type { Random } from '../random.js';
import type { ServiceFault } from './sim-app.js';

/** A replica as the fault schedule sees it. */
export interface SimNode {
  readonly name: string;
  readonly process: ManagedProcess;
  /** Its proxy to Redis; none on Cluster and Sentinel, which clients reach directly (see SimRedis). */
  readonly redisProxy: FaultProxy | undefined;
  readonly pgProxy: FaultProxy;
  /** On a lease store of the run's own (etcd, MySQL): this replica's proxies to it (its link to the lease store). */
  readonly storeProxies: readonly FaultProxy[];
}

/** What a fault schedule can do, and see, during one run. */
export class FaultContext {
  /** Replicas that reported a failpoint, until the kernel shows them stopped (see `stopAt`). */
  readonly #stopping = new Map<string, Promise<void>>();
  readonly #waiters = new Set<{ match: (node: string, record: Record<string, unknown>) => boolean; resolve: (node: string) => void }>();

  constructor(
    readonly nodes: readonly SimNode[],
    /** The run's Redis, or undefined when it has none (no redis-server here, and the app needs none on its lease store). */
    readonly redis: SimRedis | undefined,
    /** A key in the slot of the app's lease (`SimApp.leaseKey`), if the app names one. */
    readonly leaseKey: string | undefined,
    readonly history: History,
    readonly random: Random,
    readonly ttlMs: number,
    /** Epoch ms at which the schedule must stop injecting. */
    private deadline: number,
    private readonly restartNode: (node: SimNode) => void,
    /** The libfaketime timestamp file of the replica with a `stepped` clock fault, if the run has one. */
    private readonly clockFile?: string,
    /** The run's own PostgreSQL server, when the scenario asks for one (a restart fault needs it). */
    private readonly postgresServer?: PostgresServerProcess,
    /** The run's own primary and replica, when the scenario asks for them (a failover fault needs them). */
    private readonly cluster?: PostgresCluster,
    private readonly etcdCluster?: EtcdCluster,
    /** The app's hook on the service its job writes through (`SimApp.faultService`), if it has one. */
    private readonly serviceHook?: (fault: ServiceFault | null) => Promise<void>,
  ) {}

  /** Puts the app's service into `fault`, or back to health with null (see `SimApp.faultService`). */
  async faultService(fault: ServiceFault | null): Promise<void> {
    if (this.serviceHook === undefined) throw new Error('the service-down fault needs an app with a service to fault (SimApp.faultService)');
    await this.serviceHook(fault);
  }

  /** The run's PostgreSQL primary and replica, for the faults that fail over between them. */
  postgresCluster(fault: string): PostgresCluster {
    if (this.cluster === undefined) throw new Error(`the ${fault} fault needs the scenario to run on a replicated PostgreSQL of its own (postgres: 'replicated')`);
    return this.cluster;
  }

  /** The run's private PostgreSQL server, for the faults that restart it. */
  /** The run's etcd cluster (the etcd lease store), for the faults of etcd itself. */
  etcd(fault: string): EtcdCluster {
    if (this.etcdCluster === undefined) throw new Error(`the ${fault} fault needs the run to keep its leases in etcd (--lease-store etcd)`);
    return this.etcdCluster;
  }

  postgres(fault: string): PostgresServerProcess {
    if (this.postgresServer === undefined) throw new Error(`the ${fault} fault needs the scenario to run on its own PostgreSQL server (postgres: 'private')`);
    return this.postgresServer;
  }

  /** Sets the stepped replica's wall clock `offsetMs` off real time (0: right), from its next reading on. */
  stepClock(offsetMs: number): void {
    if (this.clockFile === undefined) throw new Error('a clock step needs the scenario to give the first replica a stepped clock fault');
    // Renamed into place: libfaketime never reads a half-written file.
    writeFileSync(`${this.clockFile}.next`, clockStepText(offsetMs));
    renameSync(`${this.clockFile}.next`, this.clockFile);
  }

  /** Moves the deadline so that at least `ms` remain (a round that must run gets a round's room). */
  ensureRemaining(ms: number): void {
    this.deadline = Math.max(this.deadline, Date.now() + ms);
  }

  /** Called by the runner for every line a replica writes. */
  observe(node: string, line: ProcessLine): void {
    // A replica that reports a failpoint with `stop` is stopping itself there (SIGSTOP), whoever armed it.
    if (line.record['kind'] === 'failpoint' && (line.record['action'] ?? 'stop') === 'stop') {
      this.#stopping.set(node, this.node(node).process.pausedItself());
      this.history.record({ at: line.at, kind: 'process', node, event: 'paused' });
    }
    for (const waiter of [...this.#waiters]) {
      if (waiter.match(node, line.record)) {
        this.#waiters.delete(waiter);
        waiter.resolve(node);
      }
    }
  }

  get remainingMs(): number {
    return this.deadline - Date.now();
  }

  sleep(ms: number): Promise<void> {
    return new Promise((r) => setTimeout(r, Math.max(0, Math.min(ms, this.remainingMs + 50))));
  }

  /** The replica that most recently reported being elected and has not lost, exited or paused since. */
  leader(): SimNode | undefined {
    const believes = new Map<string, boolean>();
    for (const e of this.history.events) {
      if (e.kind === 'belief') believes.set(e.node, e.leader);
      if (e.kind === 'process' && e.event === 'exited') believes.set(e.node, false);
    }
    let latest: SimNode | undefined;
    let latestAt = -1;
    for (const e of this.history.events) {
      if (e.kind === 'belief' && e.leader && believes.get(e.node) === true && e.at > latestAt) {
        const node = this.node(e.node);
        if (node.process.running && !node.process.paused) {
          latest = node;
          latestAt = e.at;
        }
      }
    }
    return latest;
  }

  standbys(): SimNode[] {
    const leader = this.leader();
    return this.nodes.filter((n) => n !== leader && n.process.running && !n.process.paused);
  }

  node(name: string): SimNode {
    const node = this.nodes.find((n) => n.name === name);
    if (node === undefined) throw new Error(`no node ${name}`);
    return node;
  }

  /**
   * Resolves with the node that next writes a line matching `match`, or undefined after `timeoutMs`
   * (or at the deadline, unless `pastDeadline`).
   */
  waitForLine(match: (node: string, record: Record<string, unknown>) => boolean, timeoutMs: number, pastDeadline = false): Promise<string | undefined> {
    return new Promise((resolve) => {
      // Cleared once a line matches: a timer left behind kept \`pnpm sim\` alive for up to 30 s after
      // its last run.
      const timer = setTimeout(() => {
        if (this.#waiters.delete(waiter)) resolve(undefined);
      }, Math.max(0, pastDeadline ? timeoutMs : Math.min(timeoutMs, this.remainingMs)));
      const waiter = {
        match,
        resolve: (node: string) => {
          clearTimeout(timer);
          resolve(node);
        },
      };
      this.#waiters.add(waiter);
    });
  }

  /**
   * Waits until a replica dispatches a fire at most `lateMs` after it was due (or `timeoutMs`): the
   * replicas have caught up. A dispatch that does not say when its fire was due counts as caught up.
   * Past the deadline too: the last round's backlog is part of the checked window.
   */
  async waitUntilCaughtUp(lateMs: number, timeoutMs: number): Promise<boolean> {
    const onTime = (_node: string, r: Record<string, unknown>) =>
      r['kind'] === 'dispatch' && (typeof r['scheduledAt'] !== 'number' || Date.now() - r['scheduledAt'] <= lateMs);
    return (await this.waitForLine(onTime, timeoutMs, true)) !== undefined;
  }

  /** Waits until some replica leads (or `timeoutMs`). */
  async waitForLeader(timeoutMs: number): Promise<SimNode | undefined> {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      const leader = this.leader();
      if (leader !== undefined) return leader;
      await new Promise((r) => setTimeout(r, 10));
    }
    return undefined;
  }

  fault(fault: string, phase: 'start' | 'end', target?: string, detail?: string, unreachable?: readonly ('postgres' | 'redis')[]): void {
    const event: HistoryEvent = { at: Date.now(), kind: 'fault', fault, phase, ...(target ? { target } : {}), ...(detail ? { detail } : {}), ...(unreachable ? { unreachable } : {}) };
    this.history.record(event);
  }

  /**
   * Arms `failpoint` in `node` (a `{"kind":"arm"}` line on its stdin) and waits until the replica
   * reports that it stopped itself there. False when it did not within `timeoutMs` (it is disarmed).
   */
  async stopAt(node: SimNode, failpoint: string, timeoutMs: number): Promise<boolean> {
    if (!(await this.#armAndAwaitHit(node, failpoint, { action: 'stop' }, timeoutMs))) return false;
    await this.#stopping.get(node.name);
    return true;
  }

  /** Resolves once `node`, which reported a `stop` failpoint, shows stopped in the kernel. */
  async stoppedItself(node: SimNode): Promise<void> {
    await this.#stopping.get(node.name);
  }

  /**
   * Arms `failpoint` in `node` to stall its event loop for `ms` (CPU starvation: the process stays
   * runnable, nothing in it runs) and waits for the hit. False when it did not come within `timeoutMs`.
   */
  stallAt(node: SimNode, failpoint: string, ms: number, timeoutMs: number): Promise<boolean> {
    return this.#armAndAwaitHit(node, failpoint, { action: 'stall', ms }, timeoutMs);
  }

  /** Arms `failpoint` in `node` with `action` and waits for its hit; disarms it and says false if none came in time. */
  async #armAndAwaitHit(node: SimNode, failpoint: string, action: { action: 'stop' } | { action: 'stall'; ms: number }, timeoutMs: number): Promise<boolean> {
    node.process.send({ kind: 'arm', failpoint, ...action });
    const hit = await this.waitForLine((n, r) => n === node.name && r['kind'] === 'failpoint' && r['name'] === failpoint, timeoutMs);
    if (hit !== undefined) return true;
    node.process.send({ kind: 'disarm', failpoint });
    return false;
  }

  /**
   * Has `node` check out every connection of its database pool and hold them for `ms` (a
   * `{"kind":"hold-pool"}` line on its stdin); resolves with how many it holds once it says so, or
   * undefined when it could not take them all.
   */
  async holdPool(node: SimNode, ms: number): Promise<number | undefined> {
    node.process.send({ kind: 'hold-pool', ms });
    let held: number | undefined;
    await this.waitForLine((n, r) => {
      if (n !== node.name || (r['kind'] !== 'pool-held' && r['kind'] !== 'pool-not-held')) return false;
      if (r['kind'] === 'pool-held') held = Number(r['connections']);
      return true;
    }, 5000);
    return held;
  }

  /** Stalls `node`'s event loop for `ms` from wherever it is now; resolves when it said it starts. */
  async stallNow(node: SimNode, ms: number): Promise<boolean> {
    node.process.send({ kind: 'stall', ms });
    return (await this.waitForLine((n, r) => n === node.name && r['kind'] === 'stalling', 2000)) !== undefined;
  }

  pause(node: SimNode): void {
    if (node.process.paused) return;
    node.process.pause();
    this.history.record({ at: Date.now(), kind: 'process', node: node.name, event: 'paused' });
  }

  resume(node: SimNode): void {
    node.process.resume();
    this.history.record({ at: Date.now(), kind: 'process', node: node.name, event: 'resumed' });
  }

  async kill(node: SimNode): Promise<void> {
    await node.process.kill();
  }

  restart(node: SimNode): void {
    this.restartNode(node);
  }

  /** The single server or failover pair, for the faults that need one server at a time. */
  proxiedRedis(fault: string): RedisTopology {
    if (this.redis === undefined) throw new Error(`the ${fault} fault needs the run to have a Redis`);
    if (this.redis.kind !== 'proxied') throw new Error(`the ${fault} fault needs a single Redis or a failover pair, not ${this.redis.topology}`);
    return this.redis.topology;
  }

  /** Redis Cluster or Sentinel, for the faults that let the deployment fail over on its own. */
  replicatedRedis(fault: string): ReplicatedRedis {
    if (this.redis?.kind !== 'replicated') throw new Error(`the ${fault} fault needs Redis Cluster or Sentinel`);
    return this.redis;
  }

  /**
   * Sets a replica's links: `redis` is its link to the lease store (Redis, and etcd or MySQL where the
   * run keeps its leases there), `pg` its link to PostgreSQL.
   */
  setProxies(node: SimNode, modes: { redis?: ProxyMode; pg?: ProxyMode }): void {
    if (modes.redis) for (const proxy of node.storeProxies) proxy.setMode(modes.redis);
    // A run without Redis has no link to it to cut: the lease store's link is its own, or PostgreSQL's.
    if (modes.redis && this.redis !== undefined) {
      if (node.redisProxy === undefined) throw new Error(`${node.name} reaches Redis directly: a partition from Redis needs a proxied topology`);
      node.redisProxy.setMode(modes.redis);
    }
    if (modes.pg) node.pgProxy.setMode(modes.pg);
  }
}
