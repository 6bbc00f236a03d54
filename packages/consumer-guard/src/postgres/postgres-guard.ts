import type { FencedLogger } from '@fenced/shared';
import { parseOptions } from '@fenced/shared/internal';
import { postgresGuardOptionsSchema, type PostgresGuardOptionsInput } from './postgres-guard-options.js';
import type { MeterProvider } from '@opentelemetry/api';
import { GuardMetrics } from '../metrics/guard-metrics.js';
import type { KyselyLike, KyselyTransactionOf } from '../sql/kysely-like.js';
import { fenceGuardInOver, type FenceGuardIn } from '../fence-guard.js';
import type { PgPoolEvents, PgPoolLike, PoolClientOf } from './pg-pool-session.js';
import { postgresFenceStore } from './postgres-store.js';

export type { GuardedWriteContext, GuardedWriteOptions, TransactionExecutor } from '../write-context.js';
export type { AppliedFire, LowerFenceRequest } from '../fence-records.js';
export type { FenceGuard, FenceGuardIn } from '../fence-guard.js';
export type { TokenInput } from '@fenced/shared';

/**
 * The PostgreSQL guard: refuses every mutation whose token is below the highest committed for its
 * resource, checked and raised in the mutation's own transaction; `guardedWriteIn` joins a
 * transaction the caller holds (a pg client after BEGIN, a Kysely transaction, pg-boss's `tx`).
 */
export type PostgresGuard<Trx> = FenceGuardIn<Trx>;

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
  return fenceGuardInOver(postgresFenceStore(options, { resource: options.resource, logger: options.logger as FencedLogger | undefined, metrics }));
}
