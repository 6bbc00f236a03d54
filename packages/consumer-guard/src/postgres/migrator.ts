import type { FencedLogger } from '@fenced/shared';
import { applyMigrations, emit, fillPlaceholders, numberedMigrations } from '@fenced/shared/internal';
import { sqlFiles } from './migrations/generated-sql.js';
import type { GuardObjectNames } from './names.js';
import type { GuardSession } from './session.js';

/** The migrations in order, with their numeric ids (`000001.sql` → 1). */
const migrations = numberedMigrations(sqlFiles);

/** The newest migration this version of the guard knows: a database ahead of it was migrated by a newer fenced. */
export const LATEST_MIGRATION = migrations[migrations.length - 1]!.id;

/** Replaces the placeholders of a migration with the installation's quoted object names. */
function render(text: string, names: GuardObjectNames): string {
  return fillPlaceholders(text, {
    FENCES: names.fences,
    CHECK_FN: names.checkFn,
    ADVANCE_FN: names.advanceFn,
    APPLIED: names.applied,
    AUDIT: names.audit,
    LOWER_FN: names.lowerFn,
    TAKEOVER_FN: names.takeoverFn,
    CHECKED_FN: names.checkedFn,
    CHECK_BATCH_FN: names.checkBatchFn,
    LEASES: names.leases,
  });
}

/**
 * Brings the installation up to date in one transaction, or refuses (SchemaTooNewError) when a newer
 * version of fenced already migrated it further (applyMigrations in @fenced/shared/internal says how
 * concurrent migrators are kept apart). Idempotent.
 */
export async function migrate(session: GuardSession<unknown>, names: GuardObjectNames, logger?: FencedLogger): Promise<void> {
  let applied: number[] = [];
  await session.script(async (run) => {
    applied = await applyMigrations(run, {
      installation: names.installation,
      schema: names.schema,
      migrationsTable: names.migrations,
      migrations: migrations.map((m) => ({ id: m.id, text: render(m.text, names) })),
    });
  });
  const [schema, table] = names.installation.split('.') as [string, string];
  for (const id of applied) emit(logger, { type: 'migration.applied', schema, table, id });
}
