import type pg from 'pg';
import type { RedisTarget } from '../connections.js';
import { collectStatus } from '../status/read-status.js';
import { fail, skip, type CheckResult } from './check.js';
import { appliedFiresCheck, isolationCheck, migrationsCheck, timeoutsCheck } from './postgres-checks.js';
import { mysqlBinlogCheck, mysqlIsolationCheck, mysqlMigrationsCheck, mysqlTimeoutsCheck } from './mysql-checks.js';
import type { Mysql2PoolLike } from '@fenced/consumer-guard/mysql';
import { redisDurabilityChecks } from './redis-checks.js';
import { leaseStoreRow } from '../lease-stores.js';
import type { Etcd3 } from 'etcd3';
import type { EtcdSecurity } from '../etcd-connection.js';

export interface DoctorOptions {
  /** Null on the PostgreSQL lease store with no Redis fast path. */
  readonly redis: RedisTarget | null;
  /** Where the leases live: a lease store's kind (lease-stores.ts). @defaultValue `'redis'` */
  readonly leaseStore?: string;
  /** The etcd cluster on the etcd lease store: a client, the endpoints it was given, the key prefix. */
  readonly etcd?: { readonly client: Etcd3; readonly endpoints: readonly string[]; readonly prefix: string; readonly security: EtcdSecurity } | null;
  readonly pool: pg.Pool | null;
  /** MySQL/MariaDB holding the fences (`--mysql`): its checks replace PostgreSQL's guard checks. */
  readonly mysql?: Mysql2PoolLike | null;
  /** `--no-postgres`: the deployment keeps no fences in PostgreSQL, so its checks are skipped, not failed. */
  readonly postgresSkipped?: boolean;
  readonly keyPrefix: string;
  readonly schema: string;
  readonly table: string;
  /** How long applied-fire records are meant to be kept (the guard's appliedFireRetentionMs). */
  readonly retentionMs: number;
}

export interface DoctorReport {
  readonly ok: boolean;
  readonly checks: readonly CheckResult[];
}

/** Every check, in the order an operator reads them: Redis, the leases on it, PostgreSQL. */
export async function runDoctor(options: DoctorOptions): Promise<DoctorReport> {
  const leaseStore = options.leaseStore ?? 'redis';
  const { status, inspection } = await collectStatus({
    redis: options.redis,
    leaseStore,
    etcd: options.etcd ?? null,
    pool: options.pool,
    mysql: options.mysql ?? null,
    keyPrefix: options.keyPrefix,
    schema: options.schema,
    table: options.table,
    history: 1,
  });
  const checks: CheckResult[] = [];
  const redis = options.redis;
  const row = leaseStoreRow(leaseStore);
  checks.push(...(await row.doctorChecks(options, status.leases, status.resources.map((r) => r.resource))));
  if (!row.needs.redis) {
    // Redis beside another lease store is the guard's fast path only: its durability still matters.
    if (redis !== null) checks.push(...(await redisDurabilityChecks(redis)));
    else for (const id of ['redis.eviction', 'redis.persistence', 'redis.replication']) checks.push(skip(id, `skipped: the leases live in ${row.label} and no Redis was given.`));
  }
  if (options.mysql !== undefined && options.mysql !== null && inspection !== null) {
    checks.push(mysqlMigrationsCheck(inspection, `table ${options.table}`), mysqlIsolationCheck(inspection), mysqlBinlogCheck(inspection), mysqlTimeoutsCheck(inspection));
    checks.push({ ...appliedFiresCheck(inspection, options.retentionMs, Date.parse(status.at)), id: 'mysql.applied-fires' });
  } else {
    postgresChecks(options, status, inspection, checks);
  }
  return { ok: checks.every((c) => c.verdict !== 'fail'), checks };
}

/** The guard's side of PostgreSQL: its migrations, isolation, timeouts and applied fires. */
function postgresChecks(
  options: DoctorOptions,
  status: Awaited<ReturnType<typeof collectStatus>>['status'],
  inspection: Awaited<ReturnType<typeof collectStatus>>['inspection'],
  checks: CheckResult[],
): void {
  if (inspection === null && options.postgresSkipped === true) {
    for (const id of ['postgres.migrations', 'postgres.isolation', 'postgres.timeouts', 'postgres.applied-fires']) checks.push(skip(id, 'skipped: --no-postgres.'));
  } else if (inspection === null) {
    // A deploy gate must not pass with half the checks unread.
    checks.push(
      fail(
        'postgres.database',
        'no database given: the fences, the guard\'s migrations and its timeouts went unchecked.',
        'Give --database postgres://… or set DATABASE_URL; or --no-postgres when the deployment keeps no fences in PostgreSQL.',
      ),
    );
  } else {
    checks.push(migrationsCheck(inspection, `${options.schema}.${options.table}`));
    checks.push(isolationCheck(inspection));
    checks.push(timeoutsCheck(inspection));
    checks.push(appliedFiresCheck(inspection, options.retentionMs, Date.parse(status.at)));
  }
}

const MARK = { pass: 'ok  ', warn: 'WARN', fail: 'FAIL', skip: 'skip' } as const;

export function formatDoctor(report: DoctorReport): string {
  const lines = report.checks.flatMap((c) => [`${MARK[c.verdict]}  ${c.id}: ${c.detail}`, ...(c.fix === undefined ? [] : [`      fix: ${c.fix}`])]);
  const counts = (['fail', 'warn', 'pass', 'skip'] as const).map((v) => `${report.checks.filter((c) => c.verdict === v).length} ${v === 'pass' ? 'ok' : v === 'skip' ? 'skipped' : v === 'warn' ? 'warnings' : 'failed'}`);
  return [...lines, '', `${report.ok ? 'doctor: no check failed' : 'doctor: a check failed'} (${counts.join(', ')})`].join('\n');
}
