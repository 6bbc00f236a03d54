import { createHash } from 'node:crypto';
import { SchemaTooNewError } from '../errors.js';

// Numbered migrations on MySQL/MariaDB, shared by every fenced installation there (the guard's fences,
// the coordinator's leases). MySQL commits every DDL statement on its own, so a migration cannot be
// one transaction as on PostgreSQL (numbered-migrations.ts): migrators of one installation are
// serialized by a named lock (GET_LOCK), each migration is written to be run again whole (tables
// IF NOT EXISTS, procedures dropped first), and its row is recorded once all of its statements
// succeeded. The driver stays with the caller, who hands in one connection.

/** One connection of the caller's driver: statements with `?` placeholders, answering rows. */
export interface MysqlMigrationConnection {
  run(sql: string, values?: readonly unknown[]): Promise<Array<Record<string, unknown>>>;
}

export interface MysqlMigrationPlan {
  /** `database.table` (or `table`), unquoted: names the installation in errors and keys its lock. */
  readonly installation: string;
  /** The quoted, qualified table that records applied migrations. */
  readonly migrationsTable: string;
  /** Every migration this version knows, its placeholders already replaced. */
  readonly migrations: ReadonlyArray<{ readonly id: number; readonly text: string }>;
}

/** How long a migrator waits for another one of the same installation, in seconds. */
const LOCK_WAIT_S = 60;
/** ER_DUP_FIELDNAME: the column an ALTER TABLE adds is there already. */
const DUPLICATE_COLUMN = 1060;

/**
 * A migration file's statements: the file is a mysql client script whose statements end with `$$`
 * (after `DELIMITER $$`), so procedure bodies keep their semicolons.
 */
export function mysqlScriptStatements(text: string): string[] {
  return text
    .replace(/^DELIMITER \$\$\s*$/m, '')
    .split(/\$\$[ \t]*$/m)
    .map((statement) => statement.replace(/^\s*(--[^\n]*\n\s*)*/, '').trim())
    .filter((statement) => statement.length > 0);
}

/**
 * Brings the installation up to date on `connection`, or refuses (SchemaTooNewError) when a newer
 * fenced migrated it further. Idempotent; safe from many processes at once.
 * @returns the ids applied now.
 */
export async function applyMysqlMigrations(connection: MysqlMigrationConnection, plan: MysqlMigrationPlan): Promise<number[]> {
  // GET_LOCK names are at most 64 characters: the installation is hashed into one.
  const lock = `fenced.migrate.${createHash('sha1').update(plan.installation).digest('hex')}`;
  const [got] = await connection.run('SELECT GET_LOCK(?, ?) AS got', [lock, LOCK_WAIT_S]);
  if (Number(got?.['got']) !== 1) throw new Error(`another migrator of ${plan.installation} held its lock for ${LOCK_WAIT_S} s`);
  try {
    return await applyPending(connection, plan);
  } finally {
    await connection.run('SELECT RELEASE_LOCK(?)', [lock]).catch(() => undefined);
  }
}

async function applyPending(connection: MysqlMigrationConnection, plan: MysqlMigrationPlan): Promise<number[]> {
  await connection.run(`CREATE TABLE IF NOT EXISTS ${plan.migrationsTable} (id INT NOT NULL PRIMARY KEY, applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE = InnoDB`);
  const [row] = await connection.run(`SELECT COALESCE(MAX(id), 0) AS id FROM ${plan.migrationsTable}`);
  const latest = Number(row?.['id'] ?? 0);
  const known = plan.migrations[plan.migrations.length - 1]?.id ?? 0;
  if (latest > known) throw new SchemaTooNewError(plan.installation, latest, known);
  const applied: number[] = [];
  for (const migration of plan.migrations) {
    if (migration.id <= latest) continue;
    for (const statement of mysqlScriptStatements(migration.text)) await runAgainSafely(connection, statement);
    await connection.run(`INSERT INTO ${plan.migrationsTable} (id) VALUES (?)`, [migration.id]);
    applied.push(migration.id);
  }
  return applied;
}

/**
 * One statement of a migration that may be running again whole: a column it adds may be there from
 * the run that stopped (MySQL 8 has no `ADD COLUMN IF NOT EXISTS`), which is what the statement wanted.
 */
async function runAgainSafely(connection: MysqlMigrationConnection, statement: string): Promise<void> {
  try {
    await connection.run(statement);
  } catch (err) {
    if ((err as { errno?: unknown } | null)?.errno === DUPLICATE_COLUMN && /^ALTER TABLE\b/i.test(statement)) return;
    throw err;
  }
}
