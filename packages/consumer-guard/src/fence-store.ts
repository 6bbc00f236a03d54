import type { Fence, FencedLogger, Token } from '@fenced/shared';
import type { AppliedFire, AppliedOutcome, AuditEntry, GuardInspection, ParsedLowerFenceRequest } from './fence-records.js';
import type { GuardMetrics } from './metrics/guard-metrics.js';
import type { WriteArguments } from './write-arguments.js';
import type { GuardedWriteContext, TransactionExecutor } from './write-context.js';

/**
 * The fence-store seam: what a database that holds fences does for the guards above it. The
 * PostgreSQL store (`postgres/`) and the MySQL/MariaDB store (`mysql/`) are folders behind it; the
 * combined guard, the handler wrapper and the queue adapters never name a driver. Every store passes
 * one conformance suite (test/fence-store/conformance.ts).
 *
 * A store takes arguments already validated (tokens parsed once, at the public edge) and promises:
 * - `write` checks the token against the resource's fence **in the write's own transaction**, under
 *   a lock that serializes the writes of one resource, before `fn` runs: a lower token is refused
 *   (`StaleTokenError`) and `fn` never runs; an equal token is accepted; a higher one raises the
 *   fence, committed with `fn`'s changes or not at all;
 * - the fire claim (`fireId`) is recorded in the same transaction, so a second write of one fire
 *   is refused (`DuplicateFireError`) even when both run at once; with `recordOutcome`, the text it
 *   makes of `fn`'s result is recorded with the claim, in the same transaction, and
 *   `appliedOutcome` reads it back;
 * - transactions the database aborted (deadlock, lock wait timeout, serialization failure) run
 *   again, `fn` included, up to the store's retry bound; told apart by error codes, never by text;
 * - a database that fails or goes away yields `GuardUnavailableError` saying whether anything can
 *   have been applied (only a COMMIT lost in flight leaves that unknown); the caller's own errors
 *   pass through untouched;
 * - `advance` raises a fence strictly (`FenceAheadError` when it is already there or above) and is
 *   not held off forever by a writer of a lower token frozen inside its transaction.
 */
export interface FenceStore extends FenceWriteStore, FenceAdminStore {}

/** A fence store that also writes inside a transaction the caller holds (the SQL stores). */
export type FenceStoreIn = FenceStore & Required<Pick<FenceStore, 'writeIn'>>;

/**
 * The write half of a fence store: what guarded writes, the handler wrappers and an election's
 * advance use (as kysely's `Driver` runs queries).
 */
export interface FenceWriteStore {
  /** The database kind: it labels the guard's events and metrics (`via`, `fenced.guard.path`). */
  readonly kind: FenceStoreKind;
  /** The default resource. */
  readonly resource: string;
  /** `fn` in a transaction of its own that first checks (and raises) the fence. */
  write<T>(args: WriteArguments, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>): Promise<T>;
  /**
   * The same check inside a transaction the caller holds and commits (a queue's, such as pg-boss's
   * `transactional` worker). Absent where the store has no such executor.
   */
  writeIn?<T>(tx: TransactionExecutor, args: WriteArguments, fn: (tx: TransactionExecutor, ctx: GuardedWriteContext) => Promise<T>): Promise<T>;
  /**
   * The check of a batch of fires inside a transaction the caller holds (a queue's batch, such as
   * pg-boss's), in one call and without raising: a verdict per fire, judged in order as one write
   * after another in the transaction would be (stale below the fence the fires before it left;
   * otherwise the fence raised to its token and its fire claimed, or found claimed already). The
   * lock is the one `writeIn` takes, held until the caller's transaction ends; nothing is left to do
   * but run the claimed fires' statements in `tx`. Absent where the store has no such check (or
   * when its writes are lease-checked: the batch path does not check leases).
   */
  checkBatchIn?(tx: TransactionExecutor, resource: string, fires: readonly BatchFire[]): Promise<BatchVerdict[]>;
  highest(resource: string): Promise<Token | null>;
  advance(resource: string, token: Token): Promise<void>;
  /** The {@link Fence} of `resource` (validated here: the name comes from the caller). */
  fence(resource: string): Fence;
  lastAppliedFires(resource: string, since: Date): Promise<ReadonlyMap<string, number>>;
  /** Which of `fireIds` have a claim on `resource` (see {@link Fence.appliedFireIds}). */
  appliedFireIds(resource: string, fireIds: readonly string[]): Promise<ReadonlySet<string>>;
  /** The claim of `fireId` on `resource` and the outcome its write recorded, or null if it was never applied (or was pruned). */
  appliedOutcome(resource: string, fireId: string): Promise<AppliedOutcome | null>;
}

/**
 * The admin half of a fence store: what migrations and operators (`fenced status`, `doctor`,
 * `lower-fence`, `prune`) use, as kysely keeps its `DatabaseIntrospector` beside its `Driver`.
 */
export interface FenceAdminStore {
  /** Creates or upgrades the store's tables; refuses an installation a newer fenced migrated. */
  migrate(): Promise<void>;
  lowerFence(request: ParsedLowerFenceRequest): Promise<Token | null>;
  inspect(): Promise<GuardInspection>;
  auditLog(resource?: string, limit?: number): Promise<AuditEntry[]>;
  pruneAppliedFires(olderThanMs: number): Promise<number>;
  lastAppliedFire(): Promise<AppliedFire | null>;
}

/** One fire of a batch: its token and its fire id, validated. */
export interface BatchFire {
  readonly token: Token;
  readonly fireId: string;
}

/** What a batch check said of one fire, and the fence it was judged against (for a stale one). */
export interface BatchVerdict {
  readonly verdict: 'claimed' | 'duplicate' | 'stale';
  readonly fence: Token;
}

/**
 * Which database a store keeps its fences in, as data: `'postgres'`, `'mysql'`, or any store's own
 * name. It travels from the store (`FenceStore.kind`) into events (`token.rejected`'s `via`), the
 * instruments' `path` and the operators' tools; nothing above the seam lists the kinds.
 */
export type FenceStoreKind = string;

/** What the guard composing a store hands it when it opens the store. */
export interface FenceStoreContext {
  /** The guard's default resource. */
  readonly resource: string;
  /** The user's logger: the store hands its events to `metrics.observing(logger)`, so each passes the instruments once. */
  readonly logger: FencedLogger | undefined;
  readonly metrics: GuardMetrics;
}

/**
 * A store's options, validated, waiting for the guard that will own it: what `mysqlFences(...)`
 * returns and `createGuard({ store })` takes. `Trx` is what `guardedWrite`'s `fn` receives.
 */
export interface FenceStoreFactory<Trx> {
  readonly kind: FenceStoreKind;
  open(context: FenceStoreContext): FenceStore;
  /** Never set: carries `Trx` to `createGuard`'s type. */
  readonly transactionType?: Trx;
}

/** Whether a value is a store factory (what `createGuard({ store })` takes). */
export function isFenceStoreFactory(value: unknown): value is FenceStoreFactory<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { open?: unknown }).open === 'function' && typeof (value as { kind?: unknown }).kind === 'string';
}
