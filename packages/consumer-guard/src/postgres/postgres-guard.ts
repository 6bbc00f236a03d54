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
import { postgresGuardOptionsSchema, type PostgresGuardOptionsInput } from './postgres-guard-options.js';
import type { KyselyLike, KyselyTransactionOf } from './kysely-like.js';
import { isKyselyLike, kyselySession } from './kysely-session.js';
import { adminOperations } from './admin.js';
import { guardUnavailable } from './guard-errors.js';
import { migrate } from './migrator.js';
import { BoundedMap } from '../internal/bounded-map.js';
import { guardObjectNames } from './names.js';
import { isPgPoolLike, pgPoolSession, type PgPoolLike, type PoolClientOf } from './pg-pool-session.js';
import { PhaseError, type GuardSession } from './session.js';
import {
  detailOf,
  DUPLICATE_FIRE,
  FENCE_AHEAD,
  isRetryable,
  sqlStateOf,
  STALE_TOKEN,
} from './sql-state.js';
import type { GuardedWriteContext, GuardedWriteOptions, TokenInput } from '../write-context.js';

export type { GuardedWriteContext, GuardedWriteOptions, TokenInput } from '../write-context.js';

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

type GuardOptions<Db> = Omit<PostgresGuardOptionsInput, 'db' | 'logger'> & { db: Db; logger?: FencedLogger };

/**
 * Creates a guard over a Kysely instance (PostgresDialect) or a `pg.Pool`.
 *
 * @throws {ConfigError} for bad options (names the option).
 * @example
 * ```ts
 * const guard = createPostgresGuard({ db, resource: 'billing' });
 * await guard.migrate();
 * await guard.guardedWrite(token, (trx) => trx.insertInto('invoices').values(row).execute());
 * ```
 */
export function createPostgresGuard<Db extends KyselyLike>(options: GuardOptions<Db>): PostgresGuard<KyselyTransactionOf<Db>>;
export function createPostgresGuard<Pool extends PgPoolLike>(options: GuardOptions<Pool>): PostgresGuard<PoolClientOf<Pool>>;
export function createPostgresGuard(input: GuardOptions<object>): PostgresGuard<unknown> {
  const options = parseOptions('postgres guard', postgresGuardOptionsSchema, input);
  const logger = options.logger as FencedLogger | undefined;
  const names = guardObjectNames(options.schema, options.table);
  const session = openSession(options.db);

  const unavailable = (resource: string, phase: string, cause: unknown) => guardUnavailable(logger, resource, phase, cause);
  const checkText = `SELECT ${names.checkFn}($2::text, $1::bigint, $3::boolean, $4::text)`;
  // The last fence this process saw per resource. Only a hint for the check's statement order (see
  // the SQL): a stale or missing entry costs one more statement, never correctness.
  const lastSeen = new BoundedMap<string, Token>(10_000);

  async function guardedWrite<T>(
    tokenInput: TokenInput,
    fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>,
    writeOptions?: GuardedWriteOptions,
  ): Promise<T> {
    const token = parseToken(tokenInput);
    const resource = writeOptions?.resource === undefined ? options.resource : parseResource(writeOptions.resource);
    if (typeof fn !== 'function') throw new TypeError('guardedWrite: fn must be a function');
    const fireId = writeOptions?.fireId === undefined ? null : parseFireIdText(writeOptions.fireId);

    for (let attempt = 1; ; attempt++) {
      try {
        const seen = lastSeen.get(resource);
        const check = { text: checkText, values: [token, resource, seen === undefined || token > seen, fireId] };
        const result = await session.transaction(options.isolationLevel, check, (trx) => fn(trx, { token, resource, attempt }));
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
        if (sqlStateOf(cause) === STALE_TOKEN) {
          const highest = BigInt(detailOf(cause) ?? '0');
          lastSeen.set(resource, highest);
          emit(logger, { type: 'token.rejected', resource, token, highest, via: 'postgres' });
          throw new StaleTokenError(resource, token, highest);
        }
        if (sqlStateOf(cause) === DUPLICATE_FIRE && fireId !== null) {
          lastSeen.set(resource, token);
          emit(logger, { type: 'guard.duplicate', resource, token, fireId });
          throw new DuplicateFireError(resource, fireId);
        }
        // The caller's own errors pass through untouched.
        if (phase === 'body') throw cause;
        if (isRetryable(cause) || isFencedError(cause)) throw cause;
        throw unavailable(resource, phase, cause);
      }
    }
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

  async function advance(resource: string, tokenInput: TokenInput): Promise<void> {
    const token = parseToken(tokenInput);
    try {
      await session.query({ text: `SELECT ${names.advanceFn}($1::text, $2::bigint)`, values: [resource, token] });
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
    highest: () => highest(options.resource),
    advance: (token: TokenInput) => advance(options.resource, token),
    fence,
    lowerFence,
    pruneAppliedFires,
    lastAppliedFire,
    lastAppliedFires: (since: Date) => lastAppliedFires(options.resource, since),
  });
}

function openSession(db: object): GuardSession<unknown> {
  if (isKyselyLike(db)) return kyselySession(db) as GuardSession<unknown>;
  if (isPgPoolLike(db)) return pgPoolSession(db) as GuardSession<unknown>;
  throw new ConfigError('postgres guard', [{ path: 'db', message: 'must be a Kysely instance or a pg.Pool' }]);
}

/** Jittered exponential backoff between attempts of a transaction the database aborted. */
function backoff(attempt: number): Promise<void> {
  const ceiling = Math.min(100, 2 ** attempt);
  return new Promise((resolve) => setTimeout(resolve, Math.random() * ceiling));
}
