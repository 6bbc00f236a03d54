import { failpoints } from '@fenced/shared/failpoints';
import { isFencedError, parseResource, parseToken, StaleTokenError, type Fence, type FencedLogger, type Token, type VerificationKeys } from '@fenced/shared';
import { emit, parseOptions } from '@fenced/shared/internal';
import { guardOptionsSchema, type GuardOptionsInput } from './guard-options.js';
import { wrapHandler, type GuardedHandler, type HandlerGuard, type HandlerOptions, type HandlerOutcome, type WrappedHandler } from './handler/wrap-handler.js';
import { postgresGuardWith } from './postgres/postgres-guard.js';
import { GuardMetrics } from './metrics/guard-metrics.js';
import type { MeterProvider } from '@opentelemetry/api';
import { type KyselyLike, type KyselyTransactionOf, type LowerFenceRequest, type PgPoolEvents, type PgPoolLike, type PoolClientOf, type PostgresGuard } from './postgres/index.js';
import { createRedisFastPath, type RedisFastPath } from './redis/fast-path.js';
import type { RedisClient } from './redis/redis-client.js';
import type { GuardedWriteContext, GuardedWriteOptions, TokenInput, TransactionExecutor } from './write-context.js';

/**
 * A wrapped handler for a queue that hands each job its own transaction (pg-boss's `transactional`
 * workers): `ctx.guardedWrite` runs in `tx`, so the fire's effect, its claim and the job's completion
 * commit together or not at all.
 */
export type TransactionalHandler<T> = (envelope: unknown, tx: TransactionExecutor, call?: { signal?: AbortSignal }) => Promise<HandlerOutcome<T>>;

/**
 * The combined guard: PostgreSQL is the authority, Redis the fast path. A Redis refusal is final (no
 * transaction is opened); a Redis acceptance still goes through the PostgreSQL check; after a commit
 * the Redis mark is raised. With Redis down the guard works on PostgreSQL alone (and says so in an
 * event); it never accepts on Redis alone. A mark Redis lost is rebuilt from PostgreSQL's answers.
 *
 * It is a PostgreSQL guard (every method of one, with the fast path in front where it helps), plus
 * the pre-check and the handler wrapper built on top of it.
 */
export interface Guard<Trx> extends PostgresGuard<Trx>, HandlerGuard<Trx> {
  /** The PostgreSQL guard underneath, without the fast path. */
  readonly postgres: PostgresGuard<Trx>;
  /**
   * Refuses a stale token before any work starts (so a handler never starts effects outside the
   * database for a deposed leader): on Redis when it answers, else with a plain read of the
   * PostgreSQL fence. Advisory: the write's own transaction is the authority.
   * @throws {StaleTokenError} when the token is below the mark or the fence.
   */
  precheck(token: TokenInput): Promise<void>;
  /** Wraps a task handler: validates the envelope, refuses stale and duplicate fires (see README). */
  wrapHandler<T>(handler: GuardedHandler<Trx, T>, options?: HandlerOptions): WrappedHandler<T>;
  /**
   * `wrapHandler` for a job that runs in a transaction its queue holds (pg-boss `transactional`):
   * the same checks, and `ctx.guardedWrite(fn)` runs `fn` in that transaction after the fence check
   * and the fire claim (see `guardedWriteIn`). Stale and duplicate fires resolve with their status,
   * so the queue commits the job as done instead of retrying it.
   */
  wrapTransactionalHandler<T>(handler: GuardedHandler<TransactionExecutor, T>, options?: Omit<HandlerOptions, 'onStale'>): TransactionalHandler<T>;
  /**
   * Deletes applied-fire records older than `olderThanMs` (default: the `appliedFireRetentionMs`
   * option, 7 days). Run it periodically, for example as a fenced cron job.
   */
  pruneAppliedFires(olderThanMs?: number): Promise<number>;
  /**
   * Records the refusals not yet in Redis (each is recorded a turn of the event loop after it was
   * returned) and waits for them: call it before closing the Redis client, or a refusal made just
   * before `redis.quit()` never reaches `fenced status`. The guard stays usable.
   */
  close(): Promise<void>;
}

type CreateGuardOptions<Db> = Omit<GuardOptionsInput, 'db' | 'pool' | 'redis' | 'logger' | 'keys' | 'meterProvider'> & {
  /** The OpenTelemetry meter provider of the guard's instruments (README, "Metrics"). @defaultValue the global one */
  meterProvider?: MeterProvider;
  db: Db;
  /** The `pg.Pool` behind `db` when `db` is a Kysely instance (required then; see `createPostgresGuard`). */
  pool?: PgPoolEvents;
  /** An ioredis `Redis` (single server or Sentinel) or `Cluster`, ioredis 5 or 6. */
  redis?: RedisClient;
  logger?: FencedLogger;
  keys?: VerificationKeys;
};

/**
 * Creates the combined guard.
 *
 * @example
 * ```ts
 * const guard = createGuard({ db, redis, resource: 'billing', keys: { '2026-11': process.env.FENCED_KEY! } });
 * await guard.migrate();
 * const handle = guard.wrapHandler(async (payload, ctx) => {
 *   await ctx.guardedWrite((trx) => trx.insertInto('invoices').values({ ... }).execute());
 * });
 * worker.process((job) => handle(job.data));
 * ```
 */
export function createGuard<Db extends KyselyLike>(options: CreateGuardOptions<Db> & { pool: PgPoolEvents }): Guard<KyselyTransactionOf<Db>>;
export function createGuard<Pool extends PgPoolLike>(options: CreateGuardOptions<Pool>): Guard<PoolClientOf<Pool>>;
export function createGuard(input: CreateGuardOptions<object>): Guard<unknown> {
  const options = parseOptions('guard', guardOptionsSchema, input);
  const metrics = new GuardMetrics({ meterProvider: input.meterProvider, resourceAttribute: options.metricResourceAttribute, resource: options.resource });
  // Every event passes the instruments once: the PostgreSQL side feeds them itself, the rest here.
  const logger = metrics.observing(input.logger);
  const postgres = postgresGuardWith(options, metrics);
  const fastPath: RedisFastPath | undefined =
    input.redis === undefined ? undefined : createRedisFastPath({ redis: input.redis, keyPrefix: options.keyPrefix, timeoutMs: options.redisTimeoutMs, logger, metrics });
  const raiseMark = async (resource: string, token: Token) => fastPath?.raise(resource, token);
  /**
   * After PostgreSQL refused a write as stale: the refusal goes on the record, and a mark below the
   * fence (Redis lost data, or missed a commit) is repaired from the authority.
   */
  const afterRefusal = async (err: unknown, fireId: string | undefined): Promise<void> => {
    if (!isFencedError(err, 'STALE_TOKEN')) return;
    fastPath?.recordRefusal(err.resource, err.token, err.highest, fireId);
    await raiseMark(err.resource, err.highest);
  };

  async function precheck(resource: string, token: Token, fireId?: string): Promise<void> {
    if (fastPath !== undefined && (await fastPath.check(resource, token, fireId))) return;
    const startedAt = performance.now();
    const highest = await postgres.fence(resource).highest();
    metrics.check(startedAt, resource, 'postgres');
    if (highest !== null && token < highest) {
      emit(logger, { type: 'token.rejected', resource, token, highest, via: 'postgres' });
      fastPath?.recordRefusal(resource, token, highest, fireId);
      throw new StaleTokenError(resource, token, highest);
    }
  }

  async function guardedWrite<T>(tokenInput: TokenInput, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>, writeOptions?: GuardedWriteOptions): Promise<T> {
    const token = parseToken(tokenInput);
    const resource = writeOptions?.resource === undefined ? options.resource : parseResource(writeOptions.resource);
    // A refusal here is final; an acceptance, or no answer, still goes to PostgreSQL.
    await fastPath?.check(resource, token, writeOptions?.fireId);
    return writeInPostgres(token, fn, resource, writeOptions);
  }

  /**
   * The authoritative write, with the mark kept in step with what PostgreSQL decided. `pgOptions`
   * go to the PostgreSQL guard as they are (without a resource it fences its own, validated once).
   */
  async function writeInPostgres<T>(token: Token, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>, resource: string, pgOptions: GuardedWriteOptions | undefined): Promise<T> {
    try {
      const result = await postgres.guardedWrite(token, fn, pgOptions);
      if (failpoints.armed) await failpoints.hit('guard.committed-before-mark');
      await raiseMark(resource, token);
      return result;
    } catch (err) {
      await afterRefusal(err, pgOptions?.fireId);
      throw err;
    }
  }

  async function guardedWriteIn<T>(
    tx: TransactionExecutor,
    tokenInput: TokenInput,
    fn: (tx: TransactionExecutor, ctx: GuardedWriteContext) => Promise<T>,
    writeOptions?: GuardedWriteOptions,
  ): Promise<T> {
    const token = parseToken(tokenInput);
    try {
      // No mark is raised on success: the caller commits later, or not at all, and a mark must never
      // get ahead of what PostgreSQL committed.
      return await postgres.guardedWriteIn(tx, token, fn, writeOptions);
    } catch (err) {
      await afterRefusal(err, writeOptions?.fireId);
      throw err;
    }
  }

  const handlerSettings = { keys: input.keys, maxPayloadBytes: options.maxPayloadBytes, logger, metrics };

  const fence = (resource: string): Fence => {
    const pgFence = postgres.fence(resource);
    return Object.freeze({
      resource: pgFence.resource,
      highest: () => pgFence.highest(),
      lastAppliedFires: (since: Date) => pgFence.lastAppliedFires!(since),
      async advance(token: Token) {
        await pgFence.advance(token);
        await raiseMark(pgFence.resource, token);
      },
    });
  };

  const precheckOwn = (token: TokenInput, fireId?: string) => precheck(options.resource, parseToken(token), fireId);

  // What the handler wrapper sits on. Its write skips the Redis check: the wrapper's pre-check asked
  // Redis a moment ago, and asking again would cost every fire a round trip to learn nothing new.
  const handlerGuard: HandlerGuard<unknown> = Object.freeze({
    resource: options.resource,
    precheck: precheckOwn,
    guardedWrite: <T>(token: TokenInput, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>, writeOptions?: GuardedWriteOptions) =>
      writeInPostgres(parseToken(token), fn, options.resource, writeOptions),
  });

  const guard: Guard<unknown> = Object.freeze({
    resource: options.resource,
    postgres,
    migrate: () => postgres.migrate(),
    precheck: precheckOwn,
    guardedWrite,
    highest: () => postgres.highest(),
    async advance(tokenInput: TokenInput) {
      const token = parseToken(tokenInput);
      await postgres.advance(token);
      await raiseMark(options.resource, token);
    },
    fence,
    guardedWriteIn,
    wrapHandler: <T>(handler: GuardedHandler<unknown, T>, handlerOptions?: HandlerOptions): WrappedHandler<T> =>
      wrapHandler<unknown, T>(handlerGuard, handlerSettings, handler, handlerOptions),
    wrapTransactionalHandler<T>(handler: GuardedHandler<TransactionExecutor, T>, handlerOptions: Omit<HandlerOptions, 'onStale'> = {}): TransactionalHandler<T> {
      if (typeof handler !== 'function') throw new TypeError('wrapTransactionalHandler: handler must be a function');
      return (envelope, tx, call) => {
        // The wrapper, over a guard whose write is bound to this job's transaction.
        const inTransaction: HandlerGuard<TransactionExecutor> = {
          resource: options.resource,
          precheck: precheckOwn,
          guardedWrite: (token, fn, writeOptions) => guardedWriteIn(tx, token, fn, writeOptions),
        };
        return wrapHandler(inTransaction, handlerSettings, handler, { ...handlerOptions, onStale: 'return' })(envelope, call);
      };
    },
    async lowerFence(request: LowerFenceRequest) {
      const previous = await postgres.lowerFence(request);
      // The mark never goes down by itself: reset it to the new fence as part of the admin act.
      await fastPath?.reset(request.resource ?? options.resource, parseToken(request.token));
      return previous;
    },
    pruneAppliedFires: (olderThanMs = options.appliedFireRetentionMs) => postgres.pruneAppliedFires(olderThanMs),
    lastAppliedFire: () => postgres.lastAppliedFire(),
    inspect: () => postgres.inspect(),
    auditLog: (resource?: string, limit?: number) => postgres.auditLog(resource, limit),
    lastAppliedFires: (since: Date) => postgres.lastAppliedFires(since),
    close: async () => {
      await fastPath?.flush();
    },
  });
  return guard;
}
