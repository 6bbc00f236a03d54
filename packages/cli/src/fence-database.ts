import { createMysqlGuard, type Mysql2PoolLike } from '@fenced/consumer-guard/mysql';
import { createPostgresGuard, type FenceGuard } from '@fenced/consumer-guard/postgres';
import type pg from 'pg';

/**
 * The database that holds the guard's fences, as the CLI reaches it: PostgreSQL (`--database`), or
 * MySQL/MariaDB (`--mysql`). Every command that reads or changes a fence goes through the store's
 * own guard, so the CLI never names a table or a statement of either.
 */
export type FenceDatabase = { readonly kind: 'postgres'; readonly pool: pg.Pool } | { readonly kind: 'mysql'; readonly pool: Mysql2PoolLike };

/** The store's guard on `resource` (the CLI's reads and the audited lowering go through it). */
export function fenceGuardOn(database: FenceDatabase, resource: string, names: { readonly schema: string; readonly table: string }): FenceGuard<unknown> {
  if (database.kind === 'mysql') return createMysqlGuard({ db: database.pool, resource, table: names.table });
  return createPostgresGuard({ db: database.pool, resource, schema: names.schema, table: names.table });
}

/** How an operator names the installation in a message. */
export function installationLabel(database: FenceDatabase, names: { readonly schema: string; readonly table: string }): string {
  return database.kind === 'mysql' ? `MySQL table ${names.table}` : `${names.schema}.${names.table}`;
}
