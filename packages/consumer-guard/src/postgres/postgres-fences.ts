import { parseOptions } from '@fenced/shared/internal';
import type { FenceStoreContext, FenceStoreFactory } from '../fence-store.js';
import type { KyselyLike, KyselyTransactionOf } from '../sql/kysely-like.js';
import type { PgPoolEvents, PgPoolLike, PoolClientOf } from './pg-pool-session.js';
import { postgresStoreOptionsSchema, type PostgresStoreOptionsInput } from './postgres-guard-options.js';
import { postgresFenceStore } from './postgres-store.js';

type PostgresFencesOptions<Db> = Omit<PostgresStoreOptionsInput, 'db' | 'pool'> & { db: Db; pool?: PgPoolEvents };

/**
 * The PostgreSQL fence store for `createGuard({ store })`, the same store `createGuard({ db })` and
 * `createPostgresGuard` build: options validated now, the store opened by the guard that takes it.
 *
 * @throws {ConfigError} for bad options (names the option).
 * @example
 * ```ts
 * const guard = createGuard({ store: postgresFences({ db, pool, schema: 'billing' }), resource: 'invoices', redis });
 * ```
 */
export function postgresFences<Db extends KyselyLike>(options: PostgresFencesOptions<Db> & { pool: PgPoolEvents }): FenceStoreFactory<KyselyTransactionOf<Db>>;
export function postgresFences<Pool extends PgPoolLike>(options: PostgresFencesOptions<Pool>): FenceStoreFactory<PoolClientOf<Pool>>;
export function postgresFences(input: PostgresFencesOptions<object>): FenceStoreFactory<unknown> {
  const options = parseOptions('postgres fences', postgresStoreOptionsSchema, input);
  return Object.freeze({ kind: 'postgres' as const, open: (context: FenceStoreContext) => postgresFenceStore(options, context) });
}
