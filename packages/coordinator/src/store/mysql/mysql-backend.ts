import type { FencedLogger } from '@fenced/shared';
import { MYSQL_NOW_US_SQL, parseOptions } from '@fenced/shared/internal';
import type { LeaseBackend, ReleaseHub } from '../lease-backend.js';
import { releaseHubOver } from '../release-hub.js';
import { ReleasePolling } from '../release-polling.js';
import { RenewBatcher } from '../renew-batcher.js';
import { mysqlConfigProblem } from './mysql-config.js';
import { mysqlFireLog } from './mysql-fire-log.js';
import { mysqlLeaseObjectNames, type MysqlLeaseObjectNames } from './mysql-lease-names.js';
import { migrateMysqlLeases } from './mysql-lease-migrator.js';
import { mysqlLeaseStore, type MysqlRenewAnswer } from './mysql-lease-store.js';
import { mysqlLeasesOptionsSchema, type MysqlLeasesOptionsInput } from './mysql-leases-options.js';
import { mysqlMembership } from './mysql-membership.js';
import { queryRows, type MysqlLeasePool } from './mysql-pool.js';

/** Leases in MySQL/MariaDB: a `LeaseBackend`, and the migration that creates its objects. */
export interface MysqlLeases extends LeaseBackend {
  readonly kind: 'mysql';
  /** The quoted names of its objects (for operators' tools). */
  readonly names: MysqlLeaseObjectNames;
  /** Creates or updates the lease tables and procedures beside the guard's (idempotent). */
  migrate(): Promise<void>;
}

export type MysqlLeasesOptions = Omit<MysqlLeasesOptionsInput, 'pool' | 'logger'> & {
  /** A mysql2 promise pool (`mysql2/promise`'s `createPool`). */
  pool: MysqlLeasePool;
  logger?: FencedLogger;
};

/** A generous bound for statements that are not a lease's own (their callers pass the lease's). */
const ADMIN_TIMEOUT_MS = 10_000;

/**
 * Leases in MySQL/MariaDB, beside the guard's fences: one database for both, nothing else to run.
 * Each lease is a row; one procedure call grants it and mints its token above the lease's previous
 * token and above every fence in the guard's table (so no election here can mint a token a fence
 * here already holds), one renews all of a process's leases at once, one statement releases it,
 * each checking the holder and the token, each by the server's clock. MySQL has no LISTEN/NOTIFY:
 * standbys look for a free lease every `pollMs` (one statement per look for all of a process's
 * leases), so a handover after a release takes at most one look. The scheduler's record and lease
 * groups' member lists live beside the leases.
 *
 * Call `migrate()` once (like the guard's); a store used before it fails with `SCHEMA_MISSING`.
 *
 * @throws {ConfigError} for bad options (names the option).
 * @example
 * ```ts
 * const pool = mysql.createPool({ uri: process.env.MYSQL_URL });
 * const guard = createMysqlGuard({ db: pool, resource: 'invoices' });
 * const leases = mysqlLeases({ pool });
 * await guard.migrate();
 * await leases.migrate();
 * const coordinator = createCoordinator({ store: leases, lease: 'billing', fences: [guard] });
 * ```
 */
export function mysqlLeases(input: MysqlLeasesOptions): MysqlLeases {
  const options = parseOptions('mysql leases', mysqlLeasesOptionsSchema, input);
  const pool = input.pool;
  const names = mysqlLeaseObjectNames(options.database ?? null, options.table);

  const releases = new ReleasePolling({
    pollMs: options.pollMs,
    reason: `MySQL/MariaDB has no LISTEN/NOTIFY: standbys look for a free lease every ${options.pollMs} ms`,
    pollFree: async (leases) => {
      const rows = await queryRows(
        pool,
        names.installation,
        `SELECT CAST(name AS CHAR CHARACTER SET utf8mb4) AS name, CAST(token AS CHAR) AS term FROM ${names.leases} WHERE name IN (?) AND (holder IS NULL OR expires_us <= ${MYSQL_NOW_US_SQL})`,
        [leases],
        ADMIN_TIMEOUT_MS,
        'poll releases',
      );
      return rows.map((r) => ({ lease: String(r['name']), term: String(r['term']) }));
    },
  });

  const renews = new RenewBatcher<MysqlRenewAnswer>(async (ttlMs, requests) => {
    const asked = JSON.stringify(requests.map((r) => [r.lease, r.token, r.nodeId]));
    const rows = await queryRows(pool, names.installation, `CALL ${names.renewProc}(?, ?)`, [asked, ttlMs], ADMIN_TIMEOUT_MS, 'renew');
    const answers: MysqlRenewAnswer[] = [];
    for (const row of rows) answers[Number(row['ord']) - 1] = { renewed: Number(row['renewed']) === 1, nowMicros: String(row['now_us']) };
    return answers;
  }, options.renewWindowMs);
  const shared = { releases, renews, takeover: options.takeover };

  return Object.freeze({
    kind: 'mysql' as const,
    batchesRenewals: true,
    names,
    migrate: () => migrateMysqlLeases(pool, names, input.logger),
    openLease: (lease: string, nodeId: string) => mysqlLeaseStore(pool, names, lease, nodeId, shared),
    fireLog: (lease: string) => mysqlFireLog(pool, names, lease, ADMIN_TIMEOUT_MS),
    membership: (group: string) => mysqlMembership(pool, names, group),
    openReleaseHub: async (timeoutMs: number, onError: (error: unknown) => void): Promise<ReleaseHub> =>
      releaseHubOver((lease, handlers) => releases.subscribe(lease, handlers), timeoutMs, onError),
    configProblem: (timeoutMs: number) => mysqlConfigProblem(pool, names, timeoutMs),
  });
}
