import {
  SchemaTooNewError,
  type FencedLogger,
} from '@fenced/shared';
import { emit } from '@fenced/shared/internal';
import { sqlFiles } from './migrations/generated-sql.js';
import type { GuardObjectNames } from './names.js';
import type { GuardSession } from './session.js';

/** The migrations in order, with their numeric ids (`000001.sql` → 1). */
const migrations = Object.entries(sqlFiles)
  .map(([name, text]) => ({ id: Number.parseInt(name, 10), text }))
  .sort((a, b) => a.id - b.id);

/** The newest migration this version of the guard knows: a database ahead of it was migrated by a newer fenced. */
export const LATEST_MIGRATION = migrations[migrations.length - 1]!.id;

/** Replaces the placeholders of a migration with the installation's quoted object names. */
function render(text: string, names: GuardObjectNames): string {
  return text
    .replaceAll(':FENCES', names.fences)
    .replaceAll(':CHECK_FN', names.checkFn)
    .replaceAll(':ADVANCE_FN', names.advanceFn)
    .replaceAll(':APPLIED', names.applied)
    .replaceAll(':AUDIT', names.audit)
    .replaceAll(':LOWER_FN', names.lowerFn)
    .replaceAll(':TAKEOVER_FN', names.takeoverFn);
}

/**
 * Brings the installation up to date in one transaction, or refuses (SchemaTooNewError) when a newer
 * version of fenced already migrated it further. Idempotent, and safe to run from many
 * processes at once: an advisory lock keyed on the installation serializes migrators, and each
 * migration's row is inserted before its SQL runs, so a migrator that somehow raced past the lock
 * fails on the primary key instead of applying a migration twice.
 */
export async function migrate(session: GuardSession<unknown>, names: GuardObjectNames, logger?: FencedLogger): Promise<void> {
  const applied: number[] = [];
  await session.script(async (run) => {
    await run({ text: `SELECT pg_advisory_xact_lock(hashtext('fenced.migrate'), hashtext($1))`, values: [names.installation] });
    await run({ text: `CREATE SCHEMA IF NOT EXISTS ${names.schema}`, values: [] });
    await run({
      text: `CREATE TABLE IF NOT EXISTS ${names.migrations} (id integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
      values: [],
    });
    const rows = await run({ text: `SELECT coalesce(max(id), 0) AS id FROM ${names.migrations}`, values: [] });
    const latest = Number(rows[0]?.['id'] ?? 0);
    // A newer fenced migrated this installation: its objects may mean things this version does not
    // know (graphile-worker refuses the same way). Touch nothing.
    const known = migrations[migrations.length - 1]!.id;
    if (latest > known) throw new SchemaTooNewError(names.installation, latest, known);
    for (const migration of migrations) {
      if (migration.id <= latest) continue;
      // Must come first, so that two migrators that both got here detect each other.
      await run({ text: `INSERT INTO ${names.migrations} (id) VALUES ($1)`, values: [migration.id] });
      await run({ text: render(migration.text, names), values: [] });
      applied.push(migration.id);
    }
  });
  const [schema, table] = names.installation.split('.') as [string, string];
  for (const id of applied) emit(logger, { type: 'migration.applied', schema, table, id });
}
