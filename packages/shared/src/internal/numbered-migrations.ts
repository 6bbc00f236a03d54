import { SchemaTooNewError } from '../errors.js';

// Numbered SQL migrations (graphile-worker's shape: `000001.sql`, `000002.sql`, …), shared by every
// fenced installation in PostgreSQL: the guard's fences and the coordinator's leases. The driver
// stays with the caller, who hands in `run`: statements inside one transaction on one connection.

/** A statement with bind parameters (`$1`, …). */
export interface MigrationStatement {
  readonly text: string;
  readonly values: readonly (string | number | bigint | boolean | null)[];
}

/** Runs one statement in the migrating transaction and answers its rows. */
export type RunMigrationStatement = (statement: MigrationStatement) => Promise<Record<string, unknown>[]>;

export interface MigrationPlan {
  /** `schema.name`, unquoted: names the installation in errors and serializes its migrators. */
  readonly installation: string;
  /** The quoted schema, created when missing. */
  readonly schema: string;
  /** The quoted, qualified table that records applied migrations. */
  readonly migrationsTable: string;
  /** Every migration this version knows, its placeholders already replaced. */
  readonly migrations: ReadonlyArray<{ readonly id: number; readonly text: string }>;
}

/**
 * A migration's text with its placeholders (`:NAME`, upper case: never a cast like `::text`) replaced
 * by the installation's names, each placeholder as a whole word: `:FENCES` never eats the start of
 * `:FENCES_NAME`. A placeholder the map does not name stays as it is.
 */
export function fillPlaceholders(text: string, values: Readonly<Record<string, string>>): string {
  return text.replace(/:[A-Z][A-Z_]*/g, (placeholder) => values[placeholder.slice(1)] ?? placeholder);
}

/** The migrations of a folder's generated module (`000001.sql` → id 1), in order. */
export function numberedMigrations(files: Readonly<Record<string, string>>): Array<{ id: number; text: string }> {
  return Object.entries(files)
    .map(([name, text]) => ({ id: Number.parseInt(name, 10), text }))
    .sort((a, b) => a.id - b.id);
}

/**
 * Brings the installation up to date inside the caller's transaction, or refuses
 * (SchemaTooNewError) when a newer version of fenced already migrated it further: its objects may
 * mean things this version does not know (graphile-worker refuses the same way). Safe to run from
 * many processes at once: an advisory lock keyed on the installation serializes migrators, and each
 * migration's row is inserted before its SQL runs, so a migrator that somehow raced past the lock
 * fails on the primary key instead of applying a migration twice.
 *
 * @returns the ids applied now.
 */
export async function applyMigrations(run: RunMigrationStatement, plan: MigrationPlan): Promise<number[]> {
  const applied: number[] = [];
  await run({ text: `SELECT pg_advisory_xact_lock(hashtext('fenced.migrate'), hashtext($1))`, values: [plan.installation] });
  await run({ text: `CREATE SCHEMA IF NOT EXISTS ${plan.schema}`, values: [] });
  await run({ text: `CREATE TABLE IF NOT EXISTS ${plan.migrationsTable} (id integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`, values: [] });
  const rows = await run({ text: `SELECT coalesce(max(id), 0) AS id FROM ${plan.migrationsTable}`, values: [] });
  const latest = Number(rows[0]?.['id'] ?? 0);
  const known = plan.migrations[plan.migrations.length - 1]?.id ?? 0;
  if (latest > known) throw new SchemaTooNewError(plan.installation, latest, known);
  for (const migration of plan.migrations) {
    if (migration.id <= latest) continue;
    // Must come first, so that two migrators that both got here detect each other.
    await run({ text: `INSERT INTO ${plan.migrationsTable} (id) VALUES ($1)`, values: [migration.id] });
    await run({ text: migration.text, values: [] });
    applied.push(migration.id);
  }
  return applied;
}
