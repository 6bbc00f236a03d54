import type { FencedLogger } from '@fenced/shared';
import { applyMysqlMigrations, emit, fillPlaceholders, numberedMigrations } from '@fenced/shared/internal';
import { sqlFiles } from './migrations/generated-sql.js';
import type { MysqlObjectNames } from './names.js';
import type { MysqlSession } from './session.js';

/** The migrations in order, with their numeric ids (`000001.sql` → 1). */
const migrations = numberedMigrations(sqlFiles);

/** The newest migration this version of the MySQL store knows. */
export const LATEST_MYSQL_MIGRATION = migrations[migrations.length - 1]!.id;

/** A migration with its placeholders replaced by the installation's quoted names. */
function renderMigration(text: string, names: MysqlObjectNames): string {
  return fillPlaceholders(text, {
    FENCES: names.fences,
    APPLIED: names.applied,
    AUDIT: names.audit,
    CHECK_PROC: names.checkProc,
    ADVANCE_PROC: names.advanceProc,
    LOWER_PROC: names.lowerProc,
    LEASE_CHECK_PROC: names.leaseCheckProc,
    LEASE_TERMS: names.leaseTerms,
    LEASES: names.leases,
  });
}

/**
 * Brings the installation up to date, or refuses (SchemaTooNewError) when a newer fenced migrated it
 * further (the shared runner: a named lock serializes migrators, each migration runs again whole).
 * Idempotent.
 */
export async function migrateMysql(session: MysqlSession<unknown>, names: MysqlObjectNames, logger?: FencedLogger): Promise<void> {
  const applied = await session.withConnection((connection) =>
    applyMysqlMigrations(connection, {
      installation: names.installation,
      migrationsTable: names.migrations,
      migrations: migrations.map((m) => ({ id: m.id, text: renderMigration(m.text, names) })),
    }),
  );
  const [database, table] = names.database === null ? ['', names.table] : [names.database, names.table];
  for (const id of applied) emit(logger, { type: 'migration.applied', schema: database, table, id });
}
