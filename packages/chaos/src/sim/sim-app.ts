import type { ClockFault } from '../faketime.js';
import type { FenceState } from '../checker/check-run.js';
import type { Effect } from '../history.js';
import type { ProcessSpec } from '../process/managed-process.js';
import type { ScenarioName } from './scenario-names.js';
import type { LeaseStoreName } from './lease-store-runs.js';

/** Guarded: the app with its protections on. Control: the same app and faults with them off. */
export type SimMode = 'guarded' | 'control';

/** What every replica of one run shares. */
export interface RunContext {
  /** Unique per run: name the run's schema and key prefix after it. */
  readonly id: string;
  readonly mode: SimMode;
  /** The real database (the supervisor's own connection; replicas get a proxied one). */
  readonly databaseUrl: string;
  readonly ttlMs: number;
  readonly renewIntervalMs: number;
  readonly everyMs: number;
  /** The scenario being run. */
  readonly scenario: string;
  /** Where the control takes due times from (see `Scenario.controlClock`). */
  readonly controlClock: 'server' | 'local';
  /**
   * Where the replicas keep their lease (and the scheduler its record): Redis, the PostgreSQL
   * database itself (behind each replica's fault proxy, like its writes), a three-member etcd
   * cluster of the run's own (each replica reaching every member through a fault proxy of its own),
   * or a MariaDB server of the run's own (likewise).
   */
  readonly leaseStore: LeaseStoreName;
  /**
   * On a replicated PostgreSQL of the run's own (`Scenario.postgres: 'replicated'`): one URL per
   * member, each reaching that server directly, for a lease store's primary confirmation.
   */
  readonly postgresMembers?: readonly string[];
  /** On the MySQL store: the run's own MariaDB, reached directly (the replicas get a proxied URL). */
  readonly mysqlUrl?: string;
}

/** The lease stores the simulation runs on: one row each in lease-store-runs.ts. */
export { LEASE_STORES, type LeaseStoreName } from './lease-store-runs.js';

/** Where a replica finds Redis. */
export type RedisEndpoint =
  /** One server, behind this replica's own fault proxy. */
  | { readonly kind: 'server'; readonly url: string }
  /** A Redis Cluster: `new Cluster(nodes)`. */
  | { readonly kind: 'cluster'; readonly nodes: readonly { readonly host: string; readonly port: number }[] }
  /** A Sentinel deployment: `new Redis({ sentinels, name })`. */
  | { readonly kind: 'sentinel'; readonly sentinels: readonly { readonly host: string; readonly port: number }[]; readonly name: string };

/** One replica's view: its own name and its own connections (proxied where the topology allows). */
export interface NodeContext {
  readonly name: string;
  /** Undefined when the run has no Redis: none is installed, and the app needs none on this lease store (`SimApp.usesRedis`). */
  readonly redis: RedisEndpoint | undefined;
  readonly databaseUrl: string;
  /** On the etcd store: this replica's client endpoints, one per member, each behind its own fault proxy. */
  readonly etcdEndpoints?: readonly string[];
  /** On the MySQL store: this replica's URL of the run's MariaDB, behind its own fault proxy. */
  readonly mysqlUrl?: string;
  /** A clock fault this replica runs under, if any (applied by the supervisor through libfaketime). */
  readonly clockFault: ClockFault | undefined;
}

/**
 * What the simulation needs from an application: how to start a replica, and how to read what took
 * effect. The toolkit imports no SDK package: point it at your own handlers by implementing this.
 *
 * Replicas report on stdout, one JSON object per line:
 * - `{ "kind": "belief", "leader": true, "token": "7" }` / `{ "kind": "belief", "leader": false }`
 * - `{ "kind": "dispatch", "fireId": "…", "token": "7" }`, optionally with `"scheduledAt"` (epoch ms)
 *   and `"leading"` (its own lease current with this token at the dispatch): each enables a layer check
 * - `{ "kind": "write", "outcome": "begin" | "committed" | "stale" | "duplicate" | "failed", "fireId": "…", "token": "7" }`;
 *   a `begin` (the handler started) optionally with `"highestBefore"`: the highest token the guard
 *   knew just before the handler was called (the handler check)
 */
export interface SimApp {
  readonly name: string;
  /** The lease stores this app can run on. @defaultValue `['redis']` */
  readonly leaseStores?: readonly LeaseStoreName[];
  /**
   * The scenarios this app can run (for example, none on Redis Cluster for an app that runs on one
   * server): `--scenario all` means these, and the others are refused. All of them when absent.
   */
  readonly scenarios?: readonly ScenarioName[];
  /** Creates what a run needs (schema, tables) in the database. */
  prepare(run: RunContext): Promise<void>;
  /** The command that starts one replica. */
  replica(run: RunContext, node: NodeContext): ProcessSpec;
  /** Everything that took effect, with commit order. */
  effects(run: RunContext): Promise<Effect[]>;
  /** The fire ids due in [from, to] (epoch ms), which must all take effect. */
  expectedFireIds(run: RunContext, from: number, to: number): string[];
  /**
   * A Redis key in the slot of the app's lease. On Redis Cluster the failover scenarios hit the
   * primary that serves it. Needed by the `cluster-failover` scenario only.
   */
  leaseKey?(run: RunContext): string;
  /**
   * Per guarded resource, the fence PostgreSQL committed and the guard's Redis mark, read after the
   * replicas stopped (`redis` reaches the run's Redis directly): the guard's check that its mark is
   * never ahead of the fence. Optional; a control has no fence and answers with none.
   */
  fenceStates?(run: RunContext, redis: RedisEndpoint | undefined): Promise<FenceState[]>;
  /**
   * How much work the app still holds that no replica has begun, such as jobs waiting in a queue
   * (`redis` reaches the run's Redis directly). A run settles only once this is 0, so fires still
   * waiting for a worker are not judged missed. Optional: an app that hands fires straight to a
   * handler has none.
   */
  pendingWork?(run: RunContext, redis: RedisEndpoint | undefined): Promise<number>;
  /**
   * Whether the app's replicas (guarded and control) need Redis when their leases live in
   * `leaseStore`. A run always has a Redis where `redis-server` is installed (`NodeContext.redis`);
   * where it is not, `pnpm sim` keeps only the runs whose app needs none, starts none for them (the
   * endpoints are then undefined), and says what it left out.
   * @defaultValue true, on every lease store
   */
  usesRedis?(leaseStore: LeaseStoreName): boolean;
  /**
   * Puts the service the app's job writes through (an HTTP service of its own, say) into `fault`,
   * or back to health with null, and resolves once the service acts on it. The `service-down`
   * scenario needs it: only apps that have such a service run that scenario.
   * - `'unavailable'`: every call is answered 503 before anything is done;
   * - `'answer-lost'`: every call is carried out in full, then its connection is dropped unanswered
   *   (a proxy's timeout in front of a service that committed).
   */
  faultService?(run: RunContext, fault: ServiceFault | null): Promise<void>;
  /**
   * True when the app's replicas take `{"kind":"hold-pool","ms":…}` on stdin: each checks out every
   * connection of the database pool its writes use, says `{"kind":"pool-held","connections":n}` (or
   * `{"kind":"pool-not-held"}`), holds them for `ms` and says `{"kind":"pool-released"}`. The
   * `pool-exhausted` scenario needs it.
   */
  readonly replicasHoldPool?: boolean;
  /** Removes what `prepare` created. */
  cleanup(run: RunContext): Promise<void>;
}

/** What the `service-down` scenario does to the app's service (see `SimApp.faultService`). */
export type ServiceFault = 'unavailable' | 'answer-lost';
