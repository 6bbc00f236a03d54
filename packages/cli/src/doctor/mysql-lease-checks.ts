import type { Mysql2PoolLike } from '@fenced/consumer-guard/mysql';
import { LATEST_MYSQL_LEASE_MIGRATION, mysqlLeaseObjectNames, mysqlLeases } from '@fenced/coordinator/mysql';
import { fail, pass, warn, type CheckResult } from './check.js';

// The checks of a MySQL/MariaDB lease store (`mysqlLeases`): what its promise needs from the server.

export async function mysqlLeaseMigrationsCheck(pool: Mysql2PoolLike, table: string): Promise<CheckResult> {
  const id = 'leases.migrations';
  const names = mysqlLeaseObjectNames(null, table);
  const [tables] = await pool.query('SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?', [`${table}_lease_schema`]);
  const exists = (tables as unknown[]).length > 0;
  const applied = exists ? Number(((await pool.query(`SELECT COALESCE(MAX(id), 0) AS id FROM ${names.migrations}`))[0] as Array<{ id: number }>)[0]!.id) : 0;
  const where = names.installation;
  if (applied === LATEST_MYSQL_LEASE_MIGRATION) return pass(id, `${where}: migration ${applied} of ${LATEST_MYSQL_LEASE_MIGRATION} applied.`);
  if (applied > LATEST_MYSQL_LEASE_MIGRATION) {
    return fail(id, `${where}: migration ${applied} applied, newer than this version of fenced knows (${LATEST_MYSQL_LEASE_MIGRATION}).`, 'Upgrade every service that runs leases here (and this CLI) to the version that applied it.');
  }
  return fail(id, `${where}: ${applied === 0 ? 'not migrated' : `migration ${applied} of ${LATEST_MYSQL_LEASE_MIGRATION}`}: every lease call fails with SCHEMA_MISSING.`, 'Run mysqlLeases({ pool }).migrate() once at deploy (idempotent, safe to race).');
}

/** A grant acknowledged before its redo log is on disk can be forgotten by a crash, its token minted again: the store's own check. */
export async function mysqlLeaseDurabilityCheck(pool: Mysql2PoolLike, table: string): Promise<CheckResult> {
  const id = 'leases.durability';
  const problem = await mysqlLeases({ pool, table }).configProblem(10_000);
  // As synchronous_commit = off on PostgreSQL: the last second of grants, not every one.
  if (problem !== null) return warn(id, `${problem}.`, 'SET GLOBAL innodb_flush_log_at_trx_commit = 1 (and set it in the server configuration).');
  return pass(id, 'innodb_flush_log_at_trx_commit = 1: a granted lease and its token survive a crash.');
}
