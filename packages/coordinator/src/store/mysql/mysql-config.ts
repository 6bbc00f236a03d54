import type { MysqlLeaseObjectNames } from './mysql-lease-names.js';
import { queryRows, type MysqlLeasePool } from './mysql-pool.js';

/**
 * A setting of the server that makes its leases unsafe, or null: asked once at start and reported as
 * a `lease-store.config` event (`fenced doctor` asks it too). With `innodb_flush_log_at_trx_commit`
 * other than 1, a commit is acknowledged before its redo log is on disk: a crash can forget a grant
 * and the token a leader already fences with, and the next election mints it again (the fences'
 * strict advance then repairs it, but the lease layer should not lose it in the first place).
 */
export async function mysqlConfigProblem(pool: MysqlLeasePool, names: MysqlLeaseObjectNames, timeoutMs: number): Promise<string | null> {
  const [row] = await queryRows(pool, names.installation, 'SELECT @@innodb_flush_log_at_trx_commit AS flush', [], timeoutMs, 'config');
  const flush = Number(row?.['flush']);
  if (flush !== 1) return `innodb_flush_log_at_trx_commit is ${flush}: a crash can lose a granted lease and its token (set it to 1)`;
  return null;
}
