import type { LeaseObjectNames } from './lease-names.js';
import { queryRows, type PgLeasePool } from './pg-pool.js';

/**
 * A setting of the database that makes its leases unsafe, or null: asked once at start and reported
 * as a `lease-store.config` event (`fenced doctor` checks more). `synchronous_commit = off` acknowledges
 * a grant before it is durable: a crash can forget a token that a leader already holds and fenced
 * writes with, and the next election mints it again (the fences' strict advance then repairs it, as
 * after a Redis restart, but the lease layer should not lose it in the first place).
 */
export async function postgresConfigProblem(pool: PgLeasePool, names: LeaseObjectNames, timeoutMs: number): Promise<string | null> {
  const [row] = await queryRows<{ synchronous_commit: string; fsync: string }>(
    pool,
    names.installation,
    `SELECT current_setting('synchronous_commit') AS synchronous_commit, current_setting('fsync') AS fsync`,
    [],
    timeoutMs,
    'config',
  );
  if (row === undefined) return null;
  if (row.fsync === 'off') return 'fsync is off: a crash can lose granted leases and minted tokens (turn fsync on)';
  if (row.synchronous_commit === 'off') return 'synchronous_commit is off: a crash can lose a granted lease and its token (set it to on, or remote_apply with a synchronous standby)';
  return null;
}
