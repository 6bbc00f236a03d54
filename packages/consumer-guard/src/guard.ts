import type { Redis } from 'ioredis';
import type { Kysely, Transaction } from 'kysely';
import {
  isFencedError,
  parseResource,
  parseToken,
  type Fence,
  type FencedLogger,
  StaleTokenError,
  type Token,
  type VerificationKeys,
} from '@fenced/shared';
import { emit, parseOptions, withTimeout } from '@fenced/shared/internal';
import { guardOptionsSchema, type GuardOptionsInput } from './guard-options.js';

import { BoundedMap } from './internal/bounded-map.js';
import { wrapHandler, type HandlerOptions, type WrappedHandler, type GuardedHandler } from './handler/wrap-handler.js';
import {
  createPostgresGuard,
  type AppliedFire,
  type GuardedWriteContext,
  type GuardedWriteOptions,
  type LowerFenceRequest,
  type PgPoolLike,
  type PoolClientOf,
  type PostgresGuard,
  type TokenInput,
} from './postgres/index.js';
import { createRedisGuard, type RedisGuard } from './redis/index.js';

/**
 * The combined guard: PostgreSQL is the authority, Redis the fast path. A Redis refusal is final (no
 * transaction is opened); a Redis acceptance still goes through the PostgreSQL check; after a commit
 * the Redis mark is raised. With Redis down the guard works on PostgreSQL alone (and says so in an
 * event); it never accepts on Redis alone. A mark Redis lost is rebuilt from PostgreSQL's answers.
 */
export interface Guard<Trx> extends Fence {
  readonly resource: string;
  readonly postgres: PostgresGuard<Trx>;
  /** Creates or upgrades the PostgreSQL objects. */
  migrate(): Promise<void>;
  /** Like `PostgresGuard.guardedWrite`, with the Redis fast path in front. */
  guardedWrite<T>(token: TokenInput, fn: (trx: Trx, ctx: GuardedWriteContext) => Promise<T>, options?: GuardedWriteOptions): Promise<T>;
  highest(): Promise<Token | null>;
  /** Strict advance in PostgreSQL, then the Redis mark is raised too. */
  advance(token: TokenInput): Promise<void>;
  fence(resource: string): Fence;
  /** Wraps a task handler: validates the envelope, refuses stale and duplicate fires (see README). */
  wrapHandler<T>(handler: GuardedHandler<Trx, T>, options?: HandlerOptions): WrappedHandler<T>;
  /** Audited lowering of a poisoned fence in PostgreSQL; the Redis mark is then reset to match. */
  lowerFence(request: LowerFenceRequest): Promise<Token | null>;
  /**
   * Deletes applied-fire records older than `olderThanMs` (default: the `appliedFireRetentionMs`
   * option, 7 days). Run it periodically, for example as a fenced cron job.
   */
  pruneAppliedFires(olderThanMs?: number): Promise<number>;
  /** The fire most recently applied to this resource, or null. */
  lastAppliedFire(): Promise<AppliedFire | null>;
  /** Per job, the latest fire applied since `since` (see {@link Fence.lastAppliedFires}); the scheduler uses it by itself. */
  lastAppliedFires(since: Date): Promise<ReadonlyMap<string, number>>;
}

type CreateGuardOptions<Db> = Omit<GuardOptionsInput, 'db' | 'redis' | 'logger' | 'keys'> & {
  db: Db;
  redis?: Redis;
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
export function createGuard<DB>(options: CreateGuardOptions<Kysely<DB>>): Guard<Transaction<DB>>;
export function createGuard<Pool extends PgPoolLike>(options: CreateGuardOptions<Pool>): Guard<PoolClientOf<Pool>>;
export function createGuard(input: CreateGuardOptions<object>): Guard<unknown> {
  const options = parseOptions('guard', guardOptionsSchema, input);
  const logger = input.logger;
  const postgres = createPostgresGuard({
    db: input.db as PgPoolLike,
    resource: options.resource,
    schema: options.schema,
    table: options.table,
    isolationLevel: options.isolationLevel,
    maxRetries: options.maxRetries,
    ...(logger === undefined ? {} : { logger }),
  }) as PostgresGuard<unknown>;

  const redisGuards = new BoundedMap<string, RedisGuard>(10_000);
  const redisFor = (resource: string): RedisGuard | undefined => {
    if (input.redis === undefined) return undefined;
    let guard = redisGuards.get(resource);
    if (guard === undefined) {
      guard = createRedisGuard({ redis: input.redis, resource, keyPrefix: options.keyPrefix, ...(logger === undefined ? {} : { logger }) });
      redisGuards.set(resource, guard);
    }
    return guard;
  };

  let degraded = false;
  const redisFailed = (resource: string, error: unknown) => {
    if (!degraded) emit(logger, { type: 'guard.degraded', resource, error });
    degraded = true;
  };
  const redisAnswered = (resource: string) => {
    if (degraded) emit(logger, { type: 'guard.recovered', resource });
    degraded = false;
  };

  // The mark as Redis last reported it, per resource: after a commit, the raise is skipped when the
  // mark is known to be there already (one round trip saved per write in steady state). Only ever
  // used to skip raising a mark that is already high enough, so a stale entry costs a round trip.
  const knownMarks = new BoundedMap<string, Token>(10_000);

  /**
   * The fast path: throws StaleTokenError on a Redis refusal. Returns false when Redis could not
   * answer (or there is none): the caller then decides whether PostgreSQL should be asked first.
   */
  async function redisCheck(resource: string, token: Token): Promise<boolean> {
    const redis = redisFor(resource);
    if (redis === undefined) return false;
    try {
      const mark = await withTimeout(redis.check(token), options.redisTimeoutMs, 'redis check');
      if (mark === null) knownMarks.delete(resource);
      else knownMarks.set(resource, mark);
      redisAnswered(resource);
      return true;
    } catch (err) {
      if (isFencedError(err, 'STALE_TOKEN')) {
        redisAnswered(resource);
        throw err;
      }
      redisFailed(resource, err);
      return false;
    }
  }

  /**
   * Refuses a stale token before a handler runs (so it never starts effects outside the database
   * for a deposed leader): on Redis when it answers, else with a plain read of the PostgreSQL fence.
   * Advisory only; the write's own transaction is the authority.
   */
  async function precheck(resource: string, token: Token): Promise<void> {
    if (await redisCheck(resource, token)) return;
    const highest = await postgres.fence(resource).highest();
    if (highest !== null && token < highest) {
      emit(logger, { type: 'token.rejected', resource, token, highest, via: 'postgres' });
      throw new StaleTokenError(resource, token, highest);
    }
  }

  /** Raises the mark (best effort): after a commit to `token`, or to what PostgreSQL says is the fence. */
  async function raiseMark(resource: string, token: Token): Promise<void> {
    const redis = redisFor(resource);
    if (redis === undefined) return;
    const known = knownMarks.get(resource);
    if (known !== undefined && known >= token) return;
    try {
      knownMarks.set(resource, await withTimeout(redis.raise(token), options.redisTimeoutMs, 'redis raise'));
      redisAnswered(resource);
    } catch (err) {
      redisFailed(resource, err);
    }
  }

  /** The PostgreSQL write, with the mark kept in step with what PostgreSQL decided. */
  async function writeThroughPostgres<T>(
    token: Token,
    fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>,
    writeOptions: GuardedWriteOptions | undefined,
  ): Promise<T> {
    const resource = writeOptions?.resource ?? options.resource;
    try {
      const result = await postgres.guardedWrite(token, fn, writeOptions);
      await raiseMark(resource, token);
      return result;
    } catch (err) {
      // A mark below the fence (Redis lost data, or missed a commit) is repaired from the authority.
      if (isFencedError(err, 'STALE_TOKEN')) await raiseMark(resource, err.highest);
      throw err;
    }
  }

  async function guardedWrite<T>(tokenInput: TokenInput, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>, writeOptions?: GuardedWriteOptions): Promise<T> {
    const token = parseToken(tokenInput);
    const resource = writeOptions?.resource === undefined ? options.resource : parseResource(writeOptions.resource);
    await redisCheck(resource, token);
    return writeThroughPostgres(token, fn, { ...writeOptions, resource });
  }

  const guard: Guard<unknown> = Object.freeze({
    resource: options.resource,
    postgres,
    migrate: () => postgres.migrate(),
    guardedWrite,
    highest: () => postgres.highest(),
    async advance(tokenInput: TokenInput) {
      const token = parseToken(tokenInput);
      await postgres.advance(token);
      await raiseMark(options.resource, token);
    },
    fence(resource: string): Fence {
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
    },
    wrapHandler: <T>(handler: GuardedHandler<unknown, T>, handlerOptions?: HandlerOptions) =>
      wrapHandler<unknown, T>(
        {
          resource: options.resource,
          keys: input.keys,
          maxPayloadBytes: options.maxPayloadBytes,
          logger,
          precheck: (token) => precheck(options.resource, token),
          write: (token, fn, fireId) => writeThroughPostgres(token, fn, { fireId }),
        },
        handler,
        handlerOptions,
      ),
    async lowerFence(request: LowerFenceRequest) {
      const previous = await postgres.lowerFence(request);
      const resource = request.resource ?? options.resource;
      const redis = redisFor(resource);
      // The mark never goes down by itself: reset it to the new fence as part of the admin act.
      if (redis !== undefined) {
        await redis.forgetMark();
        knownMarks.set(resource, await redis.raise(parseToken(request.token)));
      }
      return previous;
    },
    pruneAppliedFires: (olderThanMs = options.appliedFireRetentionMs) => postgres.pruneAppliedFires(olderThanMs),
    lastAppliedFire: () => postgres.lastAppliedFire(),
    lastAppliedFires: (since: Date) => postgres.lastAppliedFires(since),
  });
  return guard;
}
