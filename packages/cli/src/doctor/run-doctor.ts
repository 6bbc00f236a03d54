import type pg from 'pg';
import type { RedisTarget } from '../connections.js';
import { collectStatus } from '../status/read-status.js';
import { fail, skip, type CheckResult } from './check.js';
import { clusterSlotsCheck, failoverCheck, fencesCheck } from './lease-checks.js';
import { appliedFiresCheck, isolationCheck, migrationsCheck, timeoutsCheck } from './postgres-checks.js';
import { mysqlBinlogCheck, mysqlIsolationCheck, mysqlMigrationsCheck, mysqlTimeoutsCheck } from './mysql-checks.js';
import type { Mysql2PoolLike } from '@fenced/consumer-guard/mysql';
import { clockCheck, evictionCheck, persistenceCheck, replicationCheck, sentinelCheck } from './redis-checks.js';
import type { Etcd3 } from 'etcd3';
import type { EtcdSecurity } from '../etcd-connection.js';
import { leaseClockCheck, leaseDurabilityCheck, leaseIdleTimeoutCheck, leaseListenCheck, leaseMigrationsCheck, leaseReplicationCheck } from './postgres-lease-checks.js';

export interface DoctorOptions {
  /** Null on the PostgreSQL lease store with no Redis fast path. */
  readonly redis: RedisTarget | null;
  /** Where the leases live. @defaultValue `'redis'` */
  readonly leaseStore?: 'redis' | 'postgres' | 'etcd';
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
  if (leaseStore === 'postgres') {
    const pool = options.pool!;
    const ttls = status.leases.flatMap((l) => (l.elections[0] === undefined ? [] : [l.elections[0].ttlMs]));
    checks.push(await leaseMigrationsCheck(pool, options.schema, options.table));
    checks.push(await leaseDurabilityCheck(pool));
    checks.push(await leaseReplicationCheck(pool));
    checks.push(await leaseIdleTimeoutCheck(pool, ttls));
    checks.push(await leaseListenCheck(pool));
    checks.push(await leaseClockCheck(pool));
    checks.push(fencesCheck(status.leases));
    if (redis === null) for (const id of ['redis.eviction', 'redis.persistence', 'redis.replication']) checks.push(skip(id, 'skipped: the leases live in PostgreSQL and no Redis was given.'));
  }
  if (leaseStore === 'etcd') {
    const ttls = status.leases.flatMap((l) => (l.elections[0] === undefined ? [] : [l.elections[0].ttlMs]));
    // Loaded only here: etcd3 is an optional peer, absent from deployments without etcd.
    const { etcdChecks } = await import('./etcd-checks.js');
    checks.push(...(await etcdChecks(options.etcd!.client, options.etcd!.endpoints, options.etcd!.security, options.pool, ttls)));
    checks.push(fencesCheck(status.leases));
    if (redis === null) for (const id of ['redis.eviction', 'redis.persistence', 'redis.replication']) checks.push(skip(id, 'skipped: the leases live in etcd and no Redis was given.'));
  }
  if (redis !== null) await redisChecks(redis, options, status, checks);
  if (options.mysql !== undefined && options.mysql !== null && inspection !== null) {
    checks.push(mysqlMigrationsCheck(inspection, `table ${options.table}`), mysqlIsolationCheck(inspection), mysqlBinlogCheck(inspection), mysqlTimeoutsCheck(inspection));
    checks.push({ ...appliedFiresCheck(inspection, options.retentionMs, Date.parse(status.at)), id: 'mysql.applied-fires' });
  } else {
    postgresChecks(options, status, inspection, checks);
  }
  return { ok: checks.every((c) => c.verdict !== 'fail'), checks };
}

/** Redis, and the leases on it (on the PostgreSQL store, Redis is only the guard's fast path). */
async function redisChecks(redis: RedisTarget, options: DoctorOptions, status: Awaited<ReturnType<typeof collectStatus>>['status'], checks: CheckResult[]): Promise<void> {
  checks.push(await evictionCheck(redis), await persistenceCheck(redis), await replicationCheck(redis));
  if ((options.leaseStore ?? 'redis') !== 'redis') return;

  const ttls = status.leases.flatMap((l) => (l.elections[0] === undefined ? [] : [l.elections[0].ttlMs]));
  let redisFailoverMs: number | null = null;
  if (redis.kind === 'sentinel') {
    const sentinel = await sentinelCheck(redis, ttls);
    checks.push(sentinel.result);
    redisFailoverMs = sentinel.downAfterMs;
  } else {
    checks.push(skip('redis.sentinel', 'not a Sentinel deployment.'));
  }
  if (redis.kind === 'cluster') {
    const timeout = (await redis.client.nodes('master')[0]!.config('GET', 'cluster-node-timeout').catch(() => [])) as string[];
    redisFailoverMs = timeout[1] === undefined ? null : Number(timeout[1]);
  }
  checks.push(await clusterSlotsCheck(redis, options.keyPrefix, status.leases.map((l) => l.lease), status.resources.map((r) => r.resource)));
  checks.push(await clockCheck(redis));
  checks.push(fencesCheck(status.leases));
  checks.push(failoverCheck(status.leases, redisFailoverMs));
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
