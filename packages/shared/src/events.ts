/**
 * Structured events the fenced packages report. The library never writes to the console: pass a
 * logger function and route events wherever you like.
 *
 * @example
 * ```ts
 * import pino from 'pino';
 * const log = pino();
 * createPostgresGuard({ db, resource: 'billing', logger: (e) => log.info(e, e.type) });
 * ```
 */
export type FencedEvent =
  | { type: 'token.accepted'; resource: string; token: bigint }
  /** `via`: the store that refused, by its kind (`'postgres'`, `'mysql'`, ...), or `'redis'` for the fast path. */
  | { type: 'token.rejected'; resource: string; token: bigint; highest: bigint; via: string }
  | { type: 'fence.advanced'; resource: string; token: bigint }
  | { type: 'guard.retry'; resource: string; token: bigint; sqlstate: string; attempt: number }
  | { type: 'guard.unavailable'; resource: string; error: unknown }
  /** A PostgreSQL connection the guard listens on failed (killed backend, restart, timeout); the client is discarded. */
  | { type: 'guard.connection-lost'; resource: string; error: unknown }
  /**
   * The election-time advance to `token` found a guarded transaction of `blockingToken` (lower)
   * holding it up past the grace period, and ended it (`ended`), or was not allowed to.
   */
  | { type: 'guard.takeover'; resource: string; token: bigint; blockingToken: bigint; session: string; ended: boolean }
  | { type: 'guard.duplicate'; resource: string; token: bigint; fireId: string }
  /** A lease-checked write found its token's lease no longer held by it (its term is over) and was refused. */
  | { type: 'guard.lease-refused'; resource: string; token: bigint; lease: string }
  | { type: 'guard.degraded'; resource: string; error: unknown }
  | { type: 'guard.recovered'; resource: string }
  | { type: 'envelope.refused'; resource: string; code: string; fireId?: string }
  | { type: 'fence.lowered'; resource: string; from: bigint | null; to: bigint; actor: string; reason: string }
  | { type: 'migration.applied'; schema: string; table: string; id: number }
  | { type: 'lease.acquired'; lease: string; nodeId: string; token: bigint }
  | { type: 'lease.lost'; lease: string; nodeId: string; token: bigint; reason: LeaseLossReason }
  | { type: 'lease.released'; lease: string; nodeId: string; token: bigint }
  | { type: 'token.regression'; lease: string; nodeId: string; token: bigint; fenceHighest: bigint; resource: string }
  | { type: 'fence.unavailable'; lease: string; nodeId: string; token: bigint; resource: string; error: unknown }
  /**
   * A request to the lease store failed (a lease group reports under its group's name). `store` is
   * the store's kind (`LeaseBackend.kind`: `'redis'`, `'postgres'`, `'etcd'`, ...); on etcd, `error`
   * is a `LeaseStoreUnavailableError` saying why.
   */
  | { type: 'lease-store.error'; store: string; lease: string; nodeId: string; operation: string; error: unknown }
  /** A setting or state of the lease store (`store`, its kind) that makes leases unsafe or slow (see `fenced doctor`). */
  | { type: 'lease-store.config'; store: string; lease: string; nodeId: string; problem: string }
  /**
   * How a lease's standbys hear releases: `notify` (LISTEN on a connection of their own, a handover
   * in milliseconds) or `polling` (LISTEN does not work here, as behind a pooler in transaction mode:
   * standbys look every `pollMs`), and why.
   */
  | { type: 'lease.listening'; lease: string; nodeId: string; mode: 'notify' | 'polling'; reason: string }
  /**
   * An election on PostgreSQL found lease-checked writes of an expired term holding the lease row
   * past the grace period (a deposed leader frozen inside its transaction) and ended `ended` of them.
   */
  | { type: 'lease.takeover'; lease: string; nodeId: string; ended: number }
  | { type: 'fire.dispatched'; lease: string; nodeId: string; job: string; fireId: string; token: bigint }
  /**
   * One dispatch of a fire failed (its handler threw, its queue refused it): `attempt` counts this
   * term's dispatches of the fire; `retryInMs` is when it goes again, or null when this term will not
   * dispatch it again (the term ended: the next term catches it up).
   */
  | { type: 'fire.failed'; lease: string; nodeId: string; job: string; fireId: string; token: bigint; error: unknown; attempt: number; retryInMs: number | null }
  /**
   * A fire will never be dispatched again: its handler gave it up (`FireGivenUpError`, or a
   * `failed-permanent` outcome), or it failed until it fell out of the catch-up window.
   */
  | { type: 'fire.given-up'; lease: string; nodeId: string; job: string; fireId: string; token: bigint; reason: string; attempts: number; error?: unknown }
  /** A fire's write was refused as stale: a newer token wrote, so this term ends (`lease.lost`, reason `superseded`) and leaves the fire to the next term's catch-up. */
  | { type: 'fire.stale'; lease: string; nodeId: string; job: string; fireId: string; token: bigint }
  | { type: 'fire.skipped'; lease: string; nodeId: string; job: string; missed: number; reason: string };

/** Why a node stopped leading. */
export type LeaseLossReason =
  /** `stop()` gave the lease up. */
  | 'stopped'
  /** The store found the lease gone or held by another node: at a renew, or at a write beside the lease (the scheduler's fire record). */
  | 'stolen'
  /** The local deadline passed without a successful renew (pause, partition, slow Redis). */
  | 'deadline'
  /** `handOver()` gave the lease up and stayed in the election (a lease group rebalancing). */
  | 'handover'
  /**
   * A write of the term was refused as stale: a fence holds a newer token (a later term's, or one
   * minted before the lease store lost its latest writes and applied after this term's election).
   * The term can never write again; the lease is given back and elected again above that fence.
   */
  | 'superseded';

/** Receives events. Must not throw; if it does, the error is swallowed so it cannot break a write. */
export type FencedLogger = (event: FencedEvent) => void;

/** Calls `logger` with `event`, shielding the caller from a logger that throws. */
export function emit(logger: FencedLogger | undefined, event: FencedEvent): void {
  if (logger === undefined) return;
  try {
    logger(event);
  } catch {
    // A broken logger must never turn an applied write into a reported failure.
  }
}
