import { ConfigError } from '@fenced/shared';
import { withTimeout } from '@fenced/shared/internal';

/**
 * How far past a request's budget gRPC's own deadline lies: long enough for a channel to connect on
 * a loaded host, short enough that a member that stopped answering without closing its connections
 * is given up within seconds.
 */
const TRANSPORT_GRACE_MS = 5000;

/** The call options etcd3 passes to gRPC: an absolute deadline. */
export interface EtcdCallOptions {
  readonly deadline: number;
}

/**
 * Runs one etcd request within `budgetMs`, timed on a local timer: past it the request is rejected
 * with a `TimeoutError` (a `timeout` failure) and its answer, if one comes, is ignored. Every request
 * of this store is conditional or idempotent, so a late answer applied by etcd is one the next
 * request reads (an acquire that committed shows as this node's holder).
 *
 * gRPC's deadline is not the budget because etcd3 treats a call that hit its deadline as a broken
 * member: it closes that member's channel (every call on it must connect again) and its retry policy
 * sends the call once more with the same deadline, already passed, which fails at once on another
 * member and counts against that member's circuit breaker. Where a budget of a third of the TTL is
 * sometimes overrun (a loaded host), that never settled: each call found a channel still connecting,
 * overran, and closed it again. A cluster with one member cut off saw no election for 60 s beside
 * four busy processes (test/etcd/etcd-faults.test.ts), every error `DEADLINE_EXCEEDED: Deadline exceeded
 * after 0.000s, waiting for name resolution`.
 */
export function withinBudget<T>(what: string, budgetMs: number, call: (options: EtcdCallOptions) => Promise<T>): Promise<T> {
  // Refused here, not handed on: grpc-js throws on a deadline that is not a finite instant from
  // inside a promise chain of its own, where no caller can catch it (an unhandled rejection that
  // ends the host process, seen on a TLS channel with a budget of NaN).
  if (!Number.isFinite(budgetMs)) return Promise.reject(new ConfigError('etcd lease store', [{ path: 'timeoutMs', message: `etcd ${what}: a budget must be a finite number of ms, got ${String(budgetMs)}` }]));
  const ms = Math.max(1, budgetMs);
  // The budget runs on the timer (monotonic). gRPC takes its deadline only as a wall-clock instant;
  // it bounds the transport, never a lease, so a step of the wall clock moves nothing that matters.
  return withTimeout(call({ deadline: Date.now() + ms + TRANSPORT_GRACE_MS }), ms, `etcd ${what}`);
}
