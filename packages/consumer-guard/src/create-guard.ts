import type { MeterProvider } from '@opentelemetry/api';
import type { z } from 'zod';
import type { FencedLogger, VerificationKeys } from '@fenced/shared';
import { ConfigError } from '@fenced/shared';
import { parseOptions } from '@fenced/shared/internal';
import { combinedGuard, type CombinedGuard } from './combined-guard.js';
import type { FenceStore, FenceStoreFactory } from './fence-store.js';
import { combinedOptionsShape, storeGuardOptionsSchema, type GuardOptions, type StoreGuardOptionsInput } from './guard-options.js';
import { fenceGuardOptionsSchema } from './fence-guard-options.js';
import { postgresStoreOptionsShape } from './postgres/postgres-guard-options.js';
import { wrapHandler, type GuardedHandler, type HandlerOptions, type HandlerSettings, type WrappedHandler } from './handler/wrap-handler.js';
import { wrapTransactionalHandler, type TransactionalHandler } from './handler/wrap-transactional.js';
import { GuardMetrics } from './metrics/guard-metrics.js';
import { fencedEndpoint, type FencedEndpoint, type FencedRouteHandler, type RouteOptions } from './http/fenced-endpoint.js';
import type { KyselyLike, KyselyTransactionOf, PgPoolEvents, PgPoolLike, PoolClientOf } from './postgres/index.js';
import { postgresFenceStore } from './postgres/postgres-store.js';
import { createRedisFastPath } from './redis/fast-path.js';
import type { RedisClient } from './redis/redis-client.js';
import type { TransactionExecutor } from './write-context.js';

// The composition root of `createGuard`: the stores, the combined guard over them, and the handler
// layer on top of the guard's port. Each part imports only the parts below it. The one place that
// names a store: `{ db }` given directly becomes the PostgreSQL store here (the guard core takes a
// `FenceStore` and names none, as kysely's `Kysely` has no default dialect).

/** Options of `createGuard` on PostgreSQL given directly (`db`, `pool`, `schema`, …), as before stores had a seam. */
const postgresGuardOptionsSchema = fenceGuardOptionsSchema.extend({ ...postgresStoreOptionsShape, ...combinedOptionsShape });
type GuardOptionsInput = z.input<typeof postgresGuardOptionsSchema>;

/** The combined guard with the handler wrappers built on it. */
export interface Guard<Trx> extends CombinedGuard<Trx> {
  /** Wraps a task handler: validates the envelope, refuses stale and duplicate fires (see packages/consumer-guard/README.md). */
  wrapHandler<T>(handler: GuardedHandler<Trx, T>, options?: HandlerOptions): WrappedHandler<T>;
  /**
   * `wrapHandler` for a job that runs in a transaction its queue holds (pg-boss `transactional`):
   * the same checks, and `ctx.guardedWrite(fn)` runs `fn` in that transaction after the fence check
   * and the fire claim (see `guardedWriteIn`). Stale and duplicate fires resolve with their status,
   * so the queue commits the job as done instead of retrying it.
   */
  wrapTransactionalHandler<T>(handler: GuardedHandler<TransactionExecutor, T>, options?: Omit<HandlerOptions, 'onStale'>): TransactionalHandler<T>;
  /**
   * A fenced HTTP route (`@fenced/consumer-guard/http`): `handler` runs inside the guarded write of
   * the fire the request carries, on this guard's database, and its reply is recorded with the fire's
   * claim. A stale token is answered 409, a bad fire header 400 or 401, a retried fire with the first
   * reply. Serve it with `toNodeListener`, `toExpressHandler` or `toFastifyHandler`.
   */
  wrapRoute(handler: FencedRouteHandler<Trx>, options?: RouteOptions): FencedEndpoint;
}

/** What every form of `createGuard` takes beside its store. */
type CommonInput = {
  /** The OpenTelemetry meter provider of the guard's instruments (docs/operating.md, "Metrics"). @defaultValue the global one */
  meterProvider?: MeterProvider;
  /** An ioredis `Redis` (single server or Sentinel) or `Cluster`, ioredis 5 or 6. */
  redis?: RedisClient;
  logger?: FencedLogger;
  keys?: VerificationKeys;
};

type CreateStoreGuardOptions<Trx> = Omit<StoreGuardOptionsInput, 'store' | 'redis' | 'logger' | 'keys' | 'meterProvider'> &
  CommonInput & {
    /** The fence store: `mysqlFences({ db: pool })` from `@fenced/consumer-guard/mysql`, `postgresFences({ db })` from `/postgres`. */
    store: FenceStoreFactory<Trx>;
  };

type CreateGuardOptions<Db> = Omit<GuardOptionsInput, 'db' | 'pool' | 'redis' | 'logger' | 'keys' | 'meterProvider'> & {
  /** The OpenTelemetry meter provider of the guard's instruments (docs/operating.md, "Metrics"). @defaultValue the global one */
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
 * Creates the combined guard: a fence store (PostgreSQL given as `db`, or any store as `store`) with
 * the optional Redis fast path and the handler wrappers.
 *
 * @example
 * ```ts
 * const guard = createGuard({ db, redis, resource: 'billing', keys: { '2026-11': process.env.FENCED_KEY! } });
 * await guard.migrate();
 * const handle = guard.wrapHandler(async (payload, ctx) => {
 *   await ctx.guardedWrite((trx) => trx.insertInto('invoices').values({ ... }).execute());
 * });
 * worker.process((job) => handle(job.data));
 *
 * // MySQL or MariaDB (mysql2's promise pool):
 * const guard = createGuard({ store: mysqlFences({ db: pool }), resource: 'billing', keys });
 * ```
 */
export function createGuard<Db extends KyselyLike>(options: CreateGuardOptions<Db> & { pool: PgPoolEvents }): Guard<KyselyTransactionOf<Db>>;
export function createGuard<Pool extends PgPoolLike>(options: CreateGuardOptions<Pool>): Guard<PoolClientOf<Pool>>;
export function createGuard<Trx>(options: CreateStoreGuardOptions<Trx>): Guard<Trx>;
export function createGuard(input: CreateGuardOptions<object> | CreateStoreGuardOptions<unknown>): Guard<unknown> {
  const { options, open } = parseGuardOptions(input);
  const metrics = new GuardMetrics({ meterProvider: input.meterProvider, resourceAttribute: options.metricResourceAttribute, resource: options.resource, authority: open.kind });
  // Every event passes the instruments once: the store feeds them itself, the rest here.
  const logger = metrics.observing(input.logger);
  const store = open.open({ resource: options.resource, logger: input.logger, metrics });
  const fastPath =
    input.redis === undefined ? undefined : createRedisFastPath({ redis: input.redis, keyPrefix: options.keyPrefix, timeoutMs: options.redisTimeoutMs, logger, metrics });
  const parts = combinedGuard(options, store, fastPath, logger, metrics);
  const settings: HandlerSettings = { keys: input.keys, maxPayloadBytes: options.maxPayloadBytes, logger, metrics };
  return Object.freeze({
    ...parts.guard,
    wrapHandler: <T>(handler: GuardedHandler<unknown, T>, handlerOptions?: HandlerOptions) => wrapHandler<unknown, T>(parts.port, settings, handler, handlerOptions),
    wrapTransactionalHandler: <T>(handler: GuardedHandler<TransactionExecutor, T>, handlerOptions?: Omit<HandlerOptions, 'onStale'>) =>
      wrapTransactionalHandler(parts.portIn, settings, handler, handlerOptions),
    wrapRoute: (handler: FencedRouteHandler<unknown>, routeOptions?: RouteOptions) => fencedEndpoint(parts.port, { keys: input.keys, logger }, handler, routeOptions),
  });
}

/**
 * The options of either form, parsed once: with `store`, the store's factory brings its own options
 * (and PostgreSQL's, given beside it, would be ignored: refused instead); without, the PostgreSQL
 * options are the store's.
 */
function parseGuardOptions(input: CreateGuardOptions<object> | CreateStoreGuardOptions<unknown>): { options: GuardOptions; open: Pick<FenceStoreFactory<unknown>, 'kind' | 'open'> } {
  if (typeof input === 'object' && input !== null && 'store' in input && input.store !== undefined) {
    const stray = ['db', 'pool', 'schema', 'table', 'isolationLevel', 'maxRetries', 'takeover', 'checkLease'].filter((key) => key in input && (input as Record<string, unknown>)[key] !== undefined);
    if (stray.length > 0) throw new ConfigError('guard', stray.map((path) => ({ path, message: 'belongs to the store: pass it to the store (postgresFences, mysqlFences), not beside store' })));
    const options = parseOptions('guard', storeGuardOptionsSchema, input);
    return { options, open: options.store };
  }
  const options = parseOptions('guard', postgresGuardOptionsSchema, input);
  return { options, open: { kind: 'postgres', open: (context): FenceStore => postgresFenceStore(options, context) } };
}
