import type { FencedLogger } from '@fenced/shared';
import { applyMysqlMigrations, emit, numberedMigrations, withMysqlConnection } from '@fenced/shared/internal';
import { sqlFiles } from './migrations/generated-sql.js';
import { renderMysqlLeaseMigration, type MysqlLeaseObjectNames } from './mysql-lease-names.js';
import type { MysqlLeasePool } from './mysql-pool.js';

const migrations = numberedMigrations(sqlFiles);

/** The newest migration of the MySQL lease store this version knows. */
export const LATEST_MYSQL_LEASE_MIGRATION = migrations[migrations.length - 1]!.id;

/**
 * Creates or updates the lease store's tables and procedures (the shared MySQL runner: migrators of
 * one installation serialized by a named lock, each migration run again whole after a failure, a
 * newer installation refused). Idempotent; safe from many processes at once.
 */
export async function migrateMysqlLeases(pool: MysqlLeasePool, names: MysqlLeaseObjectNames, logger: FencedLogger | undefined): Promise<void> {
  const applied = await withMysqlConnection(pool, (connection) =>
    applyMysqlMigrations(
      connection,
      {
        installation: names.installation,
        migrationsTable: names.migrations,
        migrations: migrations.map((m) => ({ id: m.id, text: renderMysqlLeaseMigration(m.text, names) })),
      },
    ),
  );
  const [schema, table] = names.installation.includes('.') ? (names.installation.split('.') as [string, string]) : ['', names.installation];
  for (const id of applied) emit(logger, { type: 'migration.applied', schema, table, id });
}
