import type { Token } from '@fenced/shared';

// The shape of a guarded write, shared by the PostgreSQL guard, the combined guard and the handler
// wrapper (which sits on top of either and so imports neither's module for it).

/** A token as callers may pass it to a public entry point (parsed there, once). */
export type { TokenInput } from '@fenced/shared';

/** What `guardedWrite` tells `fn` besides the transaction. */
export interface GuardedWriteContext {
  /** The token this write was checked with. */
  readonly token: Token;
  /** The resource whose fence was checked. */
  readonly resource: string;
  /** 1 on the first attempt; higher when the database aborted an earlier attempt (deadlock, 40001). */
  readonly attempt: number;
}

/** Per-call options of `guardedWrite`. */
export interface GuardedWriteOptions<T = unknown> {
  /** Fence this resource instead of the guard's default one. */
  readonly resource?: string;
  /**
   * Claim this fire id in the same transaction: if the resource already applied it, nothing runs
   * and `DuplicateFireError` is thrown (a second dispatch of one fire changes the database once).
   */
  readonly fireId?: string;
  /**
   * The node the token was issued to (an envelope's `issuer`, the coordinator's `nodeId`). With the
   * guard's `checkLease`, the write then also checks that this very node holds the lease, not only
   * the token: after a lossy failover of the lease's database the same token can be minted again for
   * another node. The handler wrapper passes the envelope's own.
   */
  readonly issuer?: string;
  /**
   * With `fireId`: the text to record beside the fire's claim, made from what `fn` returned, in the
   * same transaction before it commits; `appliedOutcome(fireId)` reads it back. For a service that
   * answers a repeated request with its first answer (what `wrapRoute` records). An error it throws
   * aborts the write as one of `fn`'s.
   */
  readonly recordOutcome?: (result: T) => string;
}


/**
 * A transaction someone else holds open and will commit: pg-boss's `IDatabase` (the `tx` of a
 * `transactional` worker) fits as it is. The guard only runs statements on it, never BEGIN or COMMIT.
 */
export interface TransactionExecutor {
  executeSql(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}
