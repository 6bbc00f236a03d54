import type { FencedLogger } from '@fenced/shared';
import { emit, parseOptions } from '@fenced/shared/internal';
import { postgresMembership } from './postgres-membership.js';
import { postgresFireLog } from './postgres-fire-log.js';
import type { LeaseBackend, ReleaseHub } from '../lease-backend.js';
import { releaseHubOver } from '../release-hub.js';
import { leaseObjectNames, type LeaseObjectNames } from './lease-names.js';
import { migrateLeases } from './lease-migrator.js';
import { listenOnPool, queryRows, type PgLeasePool } from './pg-pool.js';
import { postgresLeaseStore, type PostgresRenewAnswer } from './postgres-lease-store.js';
import { postgresLeasesOptionsSchema, type PostgresLeasesOptionsInput } from './postgres-leases-options.js';
import { postgresConfigProblem } from './postgres-config.js';
import { ReleaseNotifications } from './release-notifications.js';
import { RenewBatcher } from '../renew-batcher.js';
import { primaryConfirmation, TIMELINE_SQL } from './primary-confirmation.js';

/** Leases in PostgreSQL: a `LeaseBackend`, and the migration that creates its objects. */
export interface PostgresLeases extends LeaseBackend {
  readonly kind: 'postgres';
  /** The quoted names of its objects (for operators' tools). */
  readonly names: LeaseObjectNames;
  /** Creates or updates the lease tables and functions beside the guard's (idempotent). */
  migrate(): Promise<void>;
  /** How standbys hear releases now: `notify`, `polling`, or undefined while nothing listens. */
  listeningMode(): 'notify' | 'polling' | undefined;
}

export type PostgresLeasesOptions = Omit<PostgresLeasesOptionsInput, 'pool' | 'logger' | 'confirmPrimary'> & {
  /** A `pg.Pool` (node-postgres 8). */
  pool: PgLeasePool;
  /** A `pg.Pool` per member of a replicated cluster: grants and renews count only from its primary (see the option's schema). */
  confirmPrimary?: { members: readonly PgLeasePool[]; timeoutMs?: number };
  logger?: FencedLogger;
};

/** A generous bound for statements that are not a lease's own (their callers pass the lease's). */
const ADMIN_TIMEOUT_MS = 10_000;

/**
 * Leases in PostgreSQL, beside the guard's fences: no Redis anywhere. Each lease is a row; one
 * function call grants it and mints its token above the lease's previous token and above every
 * fence in the guard's table (so no election here can mint a token a fence already holds), one
 * renews it and one releases it, each checking the holder and the token, each by the server's
 * clock. Standbys hear releases by LISTEN/NOTIFY (a handover in milliseconds), or poll where that
 * cannot work. The scheduler's record and lease groups' member lists live beside the leases.
 *
 * Call `migrate()` once (like the guard's); a store used before it fails with `SCHEMA_MISSING`.
 *
 * @throws {ConfigError} for bad options (names the option).
 * @example
 * ```ts
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const guard = createPostgresGuard({ db: pool, resource: 'invoices' });
 * const leases = postgresLeases({ pool });
 * await guard.migrate();
 * await leases.migrate();
 * const coordinator = createCoordinator({ store: leases, lease: 'billing', fences: [guard] });
 * ```
 */
export function postgresLeases(input: PostgresLeasesOptions): PostgresLeases {
  const options = parseOptions('postgres leases', postgresLeasesOptionsSchema, input);
  const pool = input.pool;
  const logger = input.logger;
  const names = leaseObjectNames(options.schema, options.table);
  listenOnPool(pool, (error) => emit(logger, { type: 'lease-store.error', store: 'postgres', lease: names.installation, nodeId: '', operation: 'idle connection', error }));

  const notifications = new ReleaseNotifications({
    pool,
    channel: names.channel,
    listen: options.listen,
    pollMs: options.pollMs,
    probeTimeoutMs: options.probeTimeoutMs,
    pollFree: async (leases) => {
      const rows = await queryRows<{ name: string }>(
        pool,
        names.installation,
        `SELECT name FROM ${names.leases} WHERE name = ANY($1::text[]) AND (holder IS NULL OR expires_at <= clock_timestamp())`,
        [leases],
        ADMIN_TIMEOUT_MS,
        'poll releases',
      );
      return rows.map((r) => r.name);
    },
  });

  const renews = new RenewBatcher<PostgresRenewAnswer>(async (ttlMs, requests) => {
    const rows = await queryRows<{ ord: string; renewed: boolean; now_us: string; timeline: string | null }>(
      pool,
      names.installation,
      `SELECT ord::text, renewed, now_us::text, (${TIMELINE_SQL})::text AS timeline FROM ${names.renewFn}($1::text[], $2::bigint[], $3::text[], $4)`,
      [requests.map((r) => r.lease), requests.map((r) => r.token), requests.map((r) => r.nodeId), ttlMs],
      ADMIN_TIMEOUT_MS,
      'renew',
    );
    const answers: PostgresRenewAnswer[] = [];
    for (const row of rows) answers[Number(row.ord) - 1] = { renewed: row.renewed === true, nowMicros: row.now_us, timeline: row.timeline === null ? null : BigInt(row.timeline) };
    return answers;
  }, options.renewWindowMs);
  const confirm = input.confirmPrimary;
  const primary = confirm === undefined ? undefined : primaryConfirmation(confirm.members, options.confirmPrimary?.timeoutMs ?? 1000);
  const shared = { notifications, renews, takeover: options.takeover, primary };

  return Object.freeze({
    kind: 'postgres' as const,
    batchesRenewals: true,
    names,
    migrate: () => migrateLeases(pool, names, logger),
    listeningMode: () => notifications.mode,
    openLease: (lease: string, nodeId: string, timeoutMs: number) => postgresLeaseStore(pool, names, lease, nodeId, timeoutMs, shared),
    fireLog: (lease: string) => postgresFireLog(pool, names, lease, ADMIN_TIMEOUT_MS),
    membership: (group: string) => postgresMembership(pool, names, group),
    openReleaseHub: async (timeoutMs: number, onError: (error: unknown) => void): Promise<ReleaseHub> => releaseHubOver((lease, handlers, ms) => notifications.subscribe(lease, handlers, ms), timeoutMs, onError),
    configProblem: (timeoutMs: number) => postgresConfigProblem(pool, names, timeoutMs),
  });
}
