import { parseFireIdText, parseResource, parseToken, type Fence, type Token, type TokenInput } from '@fenced/shared';
import { parseLowerFenceRequest, type AppliedFire, type AppliedOutcome, type AuditEntry, type GuardInspection, type LowerFenceRequest } from './fence-records.js';
import type { FenceStore, FenceStoreIn } from './fence-store.js';
import { parseFireIds, parseWriteArguments } from './write-arguments.js';
import type { GuardedWriteContext, GuardedWriteOptions, TransactionExecutor } from './write-context.js';

/**
 * A guard over one fence store, without the fast path: refuses every mutation whose token is below
 * the highest committed for its resource, checked and raised in the mutation's own transaction.
 * `createPostgresGuard` and `createMysqlGuard` return one with `guardedWriteIn` ({@link FenceGuardIn});
 * the combined guard exposes its store's as `guard.store`.
 */
export interface FenceGuard<Trx> extends Fence {
  /** The default resource. */
  readonly resource: string;
  /** Creates or upgrades the fence tables (and, on PostgreSQL, functions). Idempotent; safe to run concurrently. */
  migrate(): Promise<void>;
  /**
   * Runs `fn` in a transaction that first checks `token` against the resource's fence and raises the
   * fence when `token` is higher. A lower token throws `StaleTokenError` and `fn` never runs; an
   * equal token is accepted. If `fn` throws, everything rolls back and the fence is not raised.
   * When the database aborts the transaction (deadlock, serialization failure) the whole transaction,
   * `fn` included, runs again, up to `maxRetries` times: keep side effects outside the database out
   * of `fn` (use the fire's idempotency key for those).
   *
   * @returns what `fn` returns.
   * @throws {InvalidTokenError} before any database call when `token` is malformed.
   * @throws {StaleTokenError} when `token` is below the fence.
   * @throws {GuardUnavailableError} when the database fails or cannot be reached; nothing was applied
   * (or, when the COMMIT itself was lost, the outcome is unknown and says so).
   * @example
   * ```ts
   * const invoice = await guard.guardedWrite(token, (trx) =>
   *   trx.insertInto('invoices').values(row).returningAll().executeTakeFirstOrThrow());
   * ```
   */
  guardedWrite<T>(token: TokenInput, fn: (trx: Trx, ctx: GuardedWriteContext) => Promise<T>, options?: GuardedWriteOptions<T>): Promise<T>;
  /** The highest committed token of the default resource, or `null`. */
  highest(): Promise<Token | null>;
  /** Strictly raises the default resource's fence to `token` (see {@link Fence.advance}). */
  advance(token: TokenInput): Promise<void>;
  /** A {@link Fence} on another resource of the same installation (for the coordinator's list). */
  fence(resource: string): Fence;
  /**
   * Sets a fence to a lower token on purpose, writing who and why to the audit table in the same
   * transaction. For recovery from a poisoned fence (a forged or mistaken huge token); the library
   * itself never lowers a fence. Returns the previous token.
   */
  lowerFence(request: LowerFenceRequest): Promise<Token | null>;
  /**
   * Reads the installation for operators: migrations applied against known, every fence with its
   * applied-fire record, the applied-fires table's size, the server's transaction defaults.
   * Before `migrate()` it reports no fences rather than failing.
   */
  inspect(): Promise<GuardInspection>;
  /** The latest deliberate lowerings of fences (of `resource`, or all), newest first. */
  auditLog(resource?: string, limit?: number): Promise<AuditEntry[]>;
  /** Deletes applied-fire records older than `olderThanMs` (all resources); returns how many. */
  pruneAppliedFires(olderThanMs: number): Promise<number>;
  /** The fire most recently applied to the default resource (or null). */
  lastAppliedFire(): Promise<AppliedFire | null>;
  /** See {@link Fence.lastAppliedFires}: where a scheduler that lost its Redis record resumes, per job. */
  lastAppliedFires(since: Date): Promise<ReadonlyMap<string, number>>;
  /** See {@link Fence.appliedFireIds}: which of `fireIds` took effect on the default resource. */
  appliedFireIds(fireIds: readonly string[]): Promise<ReadonlySet<string>>;
  /**
   * The claim of `fireId` (on the default resource, or `resource`) and the outcome its write
   * recorded (`recordOutcome`), or null when the fire was not applied there or was pruned.
   */
  appliedOutcome(fireId: string, resource?: string): Promise<AppliedOutcome | null>;
}

/**
 * The public guard over a store: every entry point validates its arguments (the token parsed once)
 * and hands the store what it takes.
 */
export function fenceGuardOver(store: FenceStore): FenceGuard<unknown> {
  const resource = store.resource;
  // Async throughout: bad input rejects the returned promise, as a failed write does, rather than
  // throwing where the call is made.
  return Object.freeze({
    resource,
    migrate: () => store.migrate(),
    guardedWrite: async <T>(token: TokenInput, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>, options?: GuardedWriteOptions<T>) =>
      store.write(parseWriteArguments('guardedWrite', token, fn, options, resource), fn),
    highest: () => store.highest(resource),
    advance: async (token: TokenInput) => store.advance(resource, parseToken(token)),
    fence: (name: string) => store.fence(name),
    lowerFence: async (request: LowerFenceRequest) => store.lowerFence(parseLowerFenceRequest(request, resource)),
    inspect: () => store.inspect(),
    auditLog: (name?: string, limit?: number) => store.auditLog(name, limit),
    pruneAppliedFires: (olderThanMs: number) => store.pruneAppliedFires(olderThanMs),
    lastAppliedFire: () => store.lastAppliedFire(),
    lastAppliedFires: (since: Date) => store.lastAppliedFires(resource, since),
    appliedFireIds: async (fireIds: readonly string[]) => store.appliedFireIds(resource, parseFireIds(fireIds)),
    appliedOutcome: async (fireId: string, name?: string) => store.appliedOutcome(name === undefined ? resource : parseResource(name), parseFireIdText(fireId)),
  });
}

/** A guard whose store also writes inside a transaction the caller holds. */
export interface FenceGuardIn<Trx> extends FenceGuard<Trx> {
  /**
   * The same check (and fire claim) inside a transaction the caller holds and commits, such as a
   * queue's: the job's completion and the write then commit together or not at all. `tx` is that
   * transaction as the caller has it: a client or connection of the guard's driver with a transaction
   * open on it, a Kysely transaction, or anything with `executeSql(text, values)` (pg-boss's `tx`);
   * `fn` gets it back. A pool, or a connection with no transaction open, is refused (`TypeError`)
   * before anything is written. The check runs under a savepoint, so a refusal (`StaleTokenError`,
   * `DuplicateFireError`, `NotLeaderError`) rolls back only the guard's part and leaves `tx` usable
   * (the caller can still commit the job as settled). The fence row stays locked until the caller's
   * transaction ends. No retry here: an aborted transaction is the caller's to run again.
   * @example
   * ```ts
   * const conn = await pool.getConnection(); // mysql2/promise
   * await conn.beginTransaction();
   * await guard.guardedWriteIn(conn, token, (conn) => conn.query('UPDATE jobs SET done = 1 WHERE id = ?', [id]));
   * await conn.commit();
   * conn.release();
   * ```
   */
  guardedWriteIn<T, Tx extends Trx | TransactionExecutor = TransactionExecutor>(tx: Tx, token: TokenInput, fn: (tx: Tx, ctx: GuardedWriteContext) => Promise<T>, options?: GuardedWriteOptions<T>): Promise<T>;
}

/** The guard over a store that writes in a caller's transaction: the guard above, and `guardedWriteIn`. */
export function fenceGuardInOver(store: FenceStoreIn): FenceGuardIn<unknown> {
  return Object.freeze({
    ...fenceGuardOver(store),
    guardedWriteIn: async <T, Tx>(tx: Tx, token: TokenInput, fn: (tx: Tx, ctx: GuardedWriteContext) => Promise<T>, options?: GuardedWriteOptions<T>) =>
      store.writeIn(tx as TransactionExecutor, parseWriteArguments('guardedWriteIn', token, fn, options, store.resource), fn as unknown as (tx: TransactionExecutor, ctx: GuardedWriteContext) => Promise<T>),
  });
}
