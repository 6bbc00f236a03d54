import { parseToken, type Fence, type FencedLogger, type Token, type TokenInput } from '@fenced/shared';
import { parseOptions } from '@fenced/shared/internal';
import { postgresGuardOptionsSchema, type PostgresGuardOptionsInput } from './postgres-guard-options.js';
import type { MeterProvider } from '@opentelemetry/api';
import { GuardMetrics } from '../metrics/guard-metrics.js';
import type { KyselyLike, KyselyTransactionOf } from './kysely-like.js';
import { parseLowerFenceRequest } from './admin.js';
import type { AuditEntry, GuardInspection } from './inspection.js';
import type { PgPoolEvents, PgPoolLike, PoolClientOf } from './pg-pool-session.js';
import { postgresFenceStore, type PostgresFenceStore } from './postgres-store.js';
import type { AppliedFire, LowerFenceRequest } from './guard-records.js';
import { parseWriteArguments } from '../write-arguments.js';
import type { GuardedWriteContext, GuardedWriteOptions, TransactionExecutor } from '../write-context.js';

export type { GuardedWriteContext, GuardedWriteOptions, TransactionExecutor } from '../write-context.js';
export type { AppliedFire, LowerFenceRequest } from './guard-records.js';
export type { TokenInput } from '@fenced/shared';

/**
 * The PostgreSQL guard: refuses every mutation whose token is below the highest committed for its
 * resource, checked and raised in the mutation's own transaction.
 */
export interface PostgresGuard<Trx> extends Fence {
  /** The default resource. */
  readonly resource: string;
  /** Creates or upgrades the fence table and functions. Idempotent; safe to run concurrently. */
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
   * @throws {GuardUnavailableError} when PostgreSQL fails or cannot be reached; nothing was applied
   * (or, when the COMMIT itself was lost, the outcome is unknown and says so).
   * @example
   * ```ts
   * const invoice = await guard.guardedWrite(token, (trx) =>
   *   trx.insertInto('invoices').values(row).returningAll().executeTakeFirstOrThrow());
   * ```
   */
  guardedWrite<T>(token: TokenInput, fn: (trx: Trx, ctx: GuardedWriteContext) => Promise<T>, options?: GuardedWriteOptions): Promise<T>;
  /**
   * The same check (and fire claim) inside a transaction the caller holds and commits, such as a
   * queue's: the job's completion and the write then commit together or not at all. The check runs
   * under a savepoint, so a refusal (`StaleTokenError`, `DuplicateFireError`) rolls back only the
   * guard's part and leaves `tx` usable (the caller can still commit the job as settled). The fence
   * row stays locked until the caller's transaction ends. No retry here: an aborted transaction is
   * the caller's to run again. `tx` must be a transaction on the guard's database.
   */
  guardedWriteIn<T>(tx: TransactionExecutor, token: TokenInput, fn: (tx: TransactionExecutor, ctx: GuardedWriteContext) => Promise<T>, options?: GuardedWriteOptions): Promise<T>;
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
}

type GuardOptions<Db> = Omit<PostgresGuardOptionsInput, 'db' | 'pool' | 'logger' | 'meterProvider'> & { db: Db; pool?: PgPoolEvents; logger?: FencedLogger; meterProvider?: MeterProvider };

/**
 * Creates a guard over a Kysely instance (PostgresDialect, with the `pg.Pool` behind it as `pool`)
 * or a `pg.Pool`.
 *
 * @throws {ConfigError} for bad options (names the option).
 * @example
 * ```ts
 * const guard = createPostgresGuard({ db, pool, resource: 'billing' }); // db: Kysely over pool
 * await guard.migrate();
 * await guard.guardedWrite(token, (trx) => trx.insertInto('invoices').values(row).execute());
 * ```
 */
export function createPostgresGuard<Db extends KyselyLike>(options: GuardOptions<Db> & { pool: PgPoolEvents }): PostgresGuard<KyselyTransactionOf<Db>>;
export function createPostgresGuard<Pool extends PgPoolLike>(options: GuardOptions<Pool>): PostgresGuard<PoolClientOf<Pool>>;
export function createPostgresGuard(input: GuardOptions<object>): PostgresGuard<unknown> {
  const options = parseOptions('postgres guard', postgresGuardOptionsSchema, input);
  const metrics = new GuardMetrics({ meterProvider: options.meterProvider as MeterProvider | undefined, resourceAttribute: options.metricResourceAttribute, resource: options.resource });
  return postgresGuardOver(postgresFenceStore(options, metrics));
}

/**
 * The public PostgreSQL guard over a store: every entry point validates its arguments (the token
 * parsed once) and hands the store what it takes.
 */
export function postgresGuardOver(store: PostgresFenceStore): PostgresGuard<unknown> {
  const resource = store.resource;
  // Async throughout: bad input rejects the returned promise, as a failed write does, rather than
  // throwing where the call is made.
  return Object.freeze({
    resource,
    migrate: () => store.migrate(),
    guardedWrite: async <T>(token: TokenInput, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>, options?: GuardedWriteOptions) =>
      store.write(parseWriteArguments('guardedWrite', token, fn, options, resource), fn),
    guardedWriteIn: async <T>(tx: TransactionExecutor, token: TokenInput, fn: (tx: TransactionExecutor, ctx: GuardedWriteContext) => Promise<T>, options?: GuardedWriteOptions) =>
      store.writeIn(tx, parseWriteArguments('guardedWriteIn', token, fn, options, resource), fn),
    highest: () => store.highest(resource),
    advance: async (token: TokenInput) => store.advance(resource, parseToken(token)),
    fence: (name: string) => store.fence(name),
    lowerFence: async (request: LowerFenceRequest) => store.lowerFence(parseLowerFenceRequest(request, resource)),
    inspect: () => store.inspect(),
    auditLog: (name?: string, limit?: number) => store.auditLog(name, limit),
    pruneAppliedFires: (olderThanMs: number) => store.pruneAppliedFires(olderThanMs),
    lastAppliedFire: () => store.lastAppliedFire(),
    lastAppliedFires: (since: Date) => store.lastAppliedFires(resource, since),
  });
}

