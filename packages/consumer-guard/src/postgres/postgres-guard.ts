import {
  ConfigError,
  DuplicateFireError,
  FenceAheadError,
  isFencedError,
  parseFireIdText,
  parseResource,
  parseToken,
  StaleTokenError,
  type Fence,
  type FencedLogger,
  type Token,
} from '@fenced/shared';
import { emit, parseOptions } from '@fenced/shared/internal';
import { postgresGuardOptionsSchema, type PostgresGuardOptions, type PostgresGuardOptionsInput } from './postgres-guard-options.js';
import type { MeterProvider } from '@opentelemetry/api';
import { GuardMetrics } from '../metrics/guard-metrics.js';
import type { KyselyLike, KyselyTransactionOf } from './kysely-like.js';
import { isKyselyLike, kyselySession } from './kysely-session.js';
import { adminOperations } from './admin.js';
import { inspectionOperations, type AuditEntry, type GuardInspection } from './inspection.js';
import { guardUnavailable } from './guard-errors.js';
import { migrate } from './migrator.js';
import { BoundedMap } from '../internal/bounded-map.js';
import { guardObjectNames } from './names.js';
import { isPgPoolLike, pgPoolSession, type PgPoolEvents, type PgPoolLike, type PoolClientOf } from './pg-pool-session.js';
import { checkCall } from './check-call.js';
import { postgresTakeoverStore } from './postgres-takeover.js';
import { advanceWithTakeover } from '../takeover/advance-with-takeover.js';
import { PhaseError, toParams, type GuardSession } from './session.js';
import {
  detailOf,
  DUPLICATE_FIRE,
  FENCE_AHEAD,
  isRetryable,
  sqlStateOf,
  STALE_TOKEN,
} from './sql-state.js';
import type { GuardedWriteContext, GuardedWriteOptions, TokenInput, TransactionExecutor } from '../write-context.js';

export type { GuardedWriteContext, GuardedWriteOptions, TokenInput, TransactionExecutor } from '../write-context.js';

/** An explicit, audited lowering of a fence: recovery from a poisoned fence, never automatic. */
export interface LowerFenceRequest {
  readonly resource?: string;
  /** The new fence. */
  readonly token: TokenInput;
  /** Who does this (recorded in the audit table). */
  readonly actor: string;
  /** Why (recorded in the audit table). */
  readonly reason: string;
}

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

/** A fire recorded in the applied-fires table. */
export interface AppliedFire {
  readonly fireId: string;
  readonly token: Token;
  readonly appliedAt: Date;
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
  return postgresGuardWith(
    options,
    new GuardMetrics({ meterProvider: options.meterProvider as MeterProvider | undefined, resourceAttribute: options.metricResourceAttribute, resource: options.resource }),
  );
}

/**
 * The PostgreSQL guard on parsed options, recording into `metrics`: the combined guard builds its
 * PostgreSQL side with its own instruments, so nothing is counted twice.
 */
export function postgresGuardWith(options: PostgresGuardOptions, metrics: GuardMetrics): PostgresGuard<unknown> {
  const logger = metrics.observing(options.logger as FencedLogger | undefined);
  const names = guardObjectNames(options.schema, options.table);
  const session = openSession(options.db, options.pool, (error) => emit(logger, { type: 'guard.connection-lost', resource: options.resource, error }));

  const unavailable = (resource: string, phase: string, cause: unknown, outcomeUnknown = false) => guardUnavailable(logger, resource, phase, cause, outcomeUnknown);
  const check = checkCall(names.checkFn);
  // The last fence this process saw per resource. Only a hint for the check's statement order (see
  // the SQL): a stale or missing entry costs one more statement, never correctness.
  const lastSeen = new BoundedMap<string, Token>(10_000);

  /** The hint the check takes: whether this write may raise the fence. */
  function raises(token: Token, resource: string): boolean {
    const seen = lastSeen.get(resource);
    return seen === undefined || token > seen;
  }

  /** A guarded write's arguments, validated before any database call. */
  function writeArguments(caller: string, tokenInput: TokenInput, fn: unknown, writeOptions: GuardedWriteOptions | undefined) {
    const token = parseToken(tokenInput);
    const resource = writeOptions?.resource === undefined ? options.resource : parseResource(writeOptions.resource);
    if (typeof fn !== 'function') throw new TypeError(`${caller}: fn must be a function`);
    const fireId = writeOptions?.fireId === undefined ? null : parseFireIdText(writeOptions.fireId);
    return { token, resource, fireId };
  }

  /** The check's refusal as its typed error (reported, and the fence it named remembered), or undefined. */
  function refusalOf(cause: unknown, resource: string, token: Token, fireId: string | null): StaleTokenError | DuplicateFireError | undefined {
    if (sqlStateOf(cause) === STALE_TOKEN) {
      const highest = BigInt(detailOf(cause) ?? '0');
      lastSeen.set(resource, highest);
      emit(logger, { type: 'token.rejected', resource, token, highest, via: 'postgres' });
      return new StaleTokenError(resource, token, highest);
    }
    if (sqlStateOf(cause) === DUPLICATE_FIRE && fireId !== null) {
      lastSeen.set(resource, token);
      emit(logger, { type: 'guard.duplicate', resource, token, fireId });
      return new DuplicateFireError(resource, fireId);
    }
    return undefined;
  }

  async function guardedWrite<T>(
    tokenInput: TokenInput,
    fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>,
    writeOptions?: GuardedWriteOptions,
  ): Promise<T> {
    const { token, resource, fireId } = writeArguments('guardedWrite', tokenInput, fn, writeOptions);
    return metrics.timeWrite(resource, () => writeWithRetries(token, resource, fireId, fn));
  }

  async function writeWithRetries<T>(token: Token, resource: string, fireId: string | null, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await session.transaction(options.isolationLevel, check.inline(token, resource, raises(token, resource), fireId), (trx) => fn(trx, { token, resource, attempt }));
        lastSeen.set(resource, token);
        emit(logger, { type: 'token.accepted', resource, token });
        return result;
      } catch (err) {
        const phase = err instanceof PhaseError ? err.phase : 'open';
        const cause = err instanceof PhaseError ? err.cause : err;
        if (isRetryable(cause) && attempt <= options.maxRetries) {
          emit(logger, { type: 'guard.retry', resource, token, sqlstate: sqlStateOf(cause) ?? '', attempt });
          await backoff(attempt);
          continue;
        }
        const refused = refusalOf(cause, resource, token, fireId);
        if (refused !== undefined) throw refused;
        const broken = err instanceof PhaseError && err.connectionBroken;
        // The caller's own errors pass through untouched; an error fn met because the connection
        // died under it is the guard's to report.
        if (phase === 'body' && !broken) throw cause;
        if (isRetryable(cause) || (isFencedError(cause) && !broken)) throw cause;
        throw unavailable(resource, phase, cause, err instanceof PhaseError && err.outcomeUnknown);
      }
    }
  }

  // The savepoint that lets a refusal inside someone else's transaction leave that transaction usable.
  const SAVEPOINT = 'fenced_guarded_write';

  async function guardedWriteIn<T>(
    tx: TransactionExecutor,
    tokenInput: TokenInput,
    fn: (tx: TransactionExecutor, ctx: GuardedWriteContext) => Promise<T>,
    writeOptions?: GuardedWriteOptions,
  ): Promise<T> {
    if (typeof tx?.executeSql !== 'function') throw new TypeError('guardedWriteIn: tx must have executeSql(text, values)');
    const { token, resource, fireId } = writeArguments('guardedWriteIn', tokenInput, fn, writeOptions);
    return metrics.timeWrite(resource, () => writeInTransaction(tx, token, resource, fireId, fn));
  }

  async function writeInTransaction<T>(
    tx: TransactionExecutor,
    token: Token,
    resource: string,
    fireId: string | null,
    fn: (tx: TransactionExecutor, ctx: GuardedWriteContext) => Promise<T>,
  ): Promise<T> {

    try {
      await tx.executeSql(`SAVEPOINT ${SAVEPOINT}`);
    } catch (err) {
      throw unavailable(resource, 'open', err);
    }
    try {
      const statement = check.statement(token, resource, raises(token, resource), fireId);
      await tx.executeSql(statement.text, toParams(statement.values));
    } catch (err) {
      // Only the check is undone; the caller's transaction goes on. If the caller has already ended
      // it (a queue that gave up on a job past its expiry), the rollback fails: the refusal stands
      // all the same, nothing of ours was applied, and the caller's commit is what fails.
      await tx.executeSql(`ROLLBACK TO SAVEPOINT ${SAVEPOINT}`).catch(() => {});
      const refused = refusalOf(err, resource, token, fireId);
      if (refused !== undefined) throw refused;
      throw unavailable(resource, 'open', err);
    }
    const result = await fn(tx, { token, resource, attempt: 1 });
    try {
      await tx.executeSql(`RELEASE SAVEPOINT ${SAVEPOINT}`);
    } catch (err) {
      throw unavailable(resource, 'body', err);
    }
    lastSeen.set(resource, token);
    emit(logger, { type: 'token.accepted', resource, token });
    return result;
  }

  async function highest(resource: string): Promise<Token | null> {
    try {
      const rows = await session.query({ text: `SELECT token::text AS token FROM ${names.fences} WHERE resource = $1`, values: [resource] });
      const token = rows[0]?.['token'];
      return typeof token === 'string' ? BigInt(token) : null;
    } catch (err) {
      throw unavailable(resource, 'query', err);
    }
  }

  const takeoverStore = postgresTakeoverStore(session, names);

  /**
   * The strict advance, taking over from transactions of lower tokens that block it past the grace
   * period (advance-with-takeover.ts): a leader frozen inside its transaction cannot hold off the
   * next term.
   */
  async function advance(resource: string, tokenInput: TokenInput): Promise<void> {
    const token = parseToken(tokenInput);
    try {
      await advanceWithTakeover(takeoverStore, resource, token, options.takeover, (blocker) =>
        emit(logger, { type: 'guard.takeover', resource, token, blockingToken: blocker.token, session: blocker.session, ended: blocker.ended }),
      );
    } catch (err) {
      if (sqlStateOf(err) === FENCE_AHEAD) throw new FenceAheadError(resource, token, BigInt(detailOf(err) ?? '0'));
      throw unavailable(resource, 'advance', err);
    }
    emit(logger, { type: 'fence.advanced', resource, token });
  }

  const { lowerFence, pruneAppliedFires, lastAppliedFire, lastAppliedFires } = adminOperations({
    session,
    names,
    defaultResource: options.resource,
    fail: unavailable,
    logger,
    onLowered: (resource, token) => lastSeen.set(resource, token),
  });

  const { inspect, auditLog } = inspectionOperations({
    session,
    names,
    defaultResource: options.resource,
    fail: unavailable,
    logger,
  });

  const fence = (resource: string): Fence => {
    const name = parseResource(resource);
    return Object.freeze({
      resource: name,
      highest: () => highest(name),
      advance: (token: Token) => advance(name, token),
      lastAppliedFires: (since: Date) => lastAppliedFires(name, since),
    });
  };

  return Object.freeze({
    resource: options.resource,
    migrate: () => migrate(session, names, logger),
    guardedWrite,
    guardedWriteIn,
    highest: () => highest(options.resource),
    advance: (token: TokenInput) => advance(options.resource, token),
    fence,
    lowerFence,
    inspect,
    auditLog,
    pruneAppliedFires,
    lastAppliedFire,
    lastAppliedFires: (since: Date) => lastAppliedFires(options.resource, since),
  });
}

function openSession(db: object, pool: object | undefined, onConnectionError: (err: Error) => void): GuardSession<unknown> {
  if (isKyselyLike(db)) {
    if (pool === undefined) {
      throw new ConfigError('postgres guard', [
        { path: 'pool', message: "required when db is a Kysely instance: pass the pg.Pool behind its PostgresDialect, so the guard can hear a killed connection's error (unheard, it kills the process)" },
      ]);
    }
    return kyselySession(db, pool, onConnectionError) as GuardSession<unknown>;
  }
  if (isPgPoolLike(db)) return pgPoolSession(db, onConnectionError) as GuardSession<unknown>;
  throw new ConfigError('postgres guard', [{ path: 'db', message: 'must be a Kysely instance or a pg.Pool' }]);
}

/** Jittered exponential backoff between attempts of a transaction the database aborted. */
function backoff(attempt: number): Promise<void> {
  const ceiling = Math.min(100, 2 ** attempt);
  return new Promise((resolve) => setTimeout(resolve, Math.random() * ceiling));
}
