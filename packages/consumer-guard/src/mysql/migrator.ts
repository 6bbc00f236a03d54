import { createHash } from 'node:crypto';
import { SchemaTooNewError, type FencedLogger } from '@fenced/shared';
import { emit, fillPlaceholders, numberedMigrations } from '@fenced/shared/internal';
import { sqlFiles } from './migrations/generated-sql.js';
import type { MysqlObjectNames } from './names.js';
import { DUPLICATE_COLUMN, errnoOf } from './mysql-errors.js';
import type { MysqlConnection, MysqlSession } from './session.js';

/** The migrations in order, with their numeric ids (`000001.sql` → 1). */
const migrations = numberedMigrations(sqlFiles);

/** The newest migration this version of the MySQL store knows. */
export const LATEST_MYSQL_MIGRATION = migrations[migrations.length - 1]!.id;

/** How long a migrator waits for another one of the same installation, in seconds. */
const LOCK_WAIT_S = 60;

/**
 * A migration file's statements: the file is a mysql client script whose statements end with `$$`
 * (after `DELIMITER $$`), so procedure bodies keep their semicolons.
 */
export function migrationStatements(text: string, names: MysqlObjectNames): string[] {
  const filled = fillPlaceholders(text, {
    FENCES: names.fences,
    APPLIED: names.applied,
    AUDIT: names.audit,
    CHECK_PROC: names.checkProc,
    ADVANCE_PROC: names.advanceProc,
    LOWER_PROC: names.lowerProc,
  });
  return filled
    .replace(/^DELIMITER \$\$\s*$/m, '')
    .split(/\$\$[ \t]*$/m)
    .map((statement) => statement.replace(/^\s*(--[^\n]*\n\s*)*/, '').trim())
    .filter((statement) => statement.length > 0);
}

/**
 * Brings the installation up to date, or refuses (SchemaTooNewError) when a newer fenced migrated it
 * further. MySQL commits every DDL statement on its own, so a migration cannot be one transaction as
 * on PostgreSQL: migrators of one installation are serialized by a named lock (GET_LOCK), each
 * migration is written to be run again whole (tables IF NOT EXISTS, procedures dropped first), and
 * its row is recorded once all of its statements succeeded. Idempotent.
 */
export async function migrateMysql(session: MysqlSession<unknown>, names: MysqlObjectNames, logger?: FencedLogger): Promise<void> {
  const applied: number[] = [];
  await session.withConnection(async (connection) => {
    // GET_LOCK names are at most 64 characters: the installation is hashed into one.
    const lock = `fenced.migrate.${createHash('sha1').update(names.installation).digest('hex')}`;
    const [got] = await connection.run('SELECT GET_LOCK(?, ?) AS got', [lock, LOCK_WAIT_S]);
    if (Number(got?.['got']) !== 1) throw new Error(`another migrator of ${names.installation} held its lock for ${LOCK_WAIT_S} s`);
    try {
      applied.push(...(await applyPending(connection, names)));
    } finally {
      await connection.run('SELECT RELEASE_LOCK(?)', [lock]).catch(() => undefined);
    }
  });
  const [database, table] = names.database === null ? ['', names.table] : [names.database, names.table];
  for (const id of applied) emit(logger, { type: 'migration.applied', schema: database, table, id });
}

/**
 * One statement of a migration that may be running again whole: a column it adds may be there from
 * the run that stopped (MySQL 8 has no `ADD COLUMN IF NOT EXISTS`), which is what the statement wanted.
 */
async function runAgainSafely(connection: MysqlConnection, statement: string): Promise<void> {
  try {
    await connection.run(statement);
  } catch (err) {
    if (errnoOf(err) === DUPLICATE_COLUMN && /^ALTER TABLE\b/i.test(statement)) return;
    throw err;
  }
}

async function applyPending(connection: MysqlConnection, names: MysqlObjectNames): Promise<number[]> {
  await connection.run(`CREATE TABLE IF NOT EXISTS ${names.migrations} (id INT NOT NULL PRIMARY KEY, applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE = InnoDB`);
  const [row] = await connection.run(`SELECT COALESCE(MAX(id), 0) AS id FROM ${names.migrations}`);
  const latest = Number(row?.['id'] ?? 0);
  if (latest > LATEST_MYSQL_MIGRATION) throw new SchemaTooNewError(names.installation, latest, LATEST_MYSQL_MIGRATION);
  const applied: number[] = [];
  for (const migration of migrations) {
    if (migration.id <= latest) continue;
    for (const statement of migrationStatements(migration.text, names)) await runAgainSafely(connection, statement);
    await connection.run(`INSERT INTO ${names.migrations} (id) VALUES (?)`, [migration.id]);
    applied.push(migration.id);
  }
  return applied;
}
