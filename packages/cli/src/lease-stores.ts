import type { Mysql2PoolLike } from '@fenced/consumer-guard/mysql';
import type { Etcd3 } from 'etcd3';
import type pg from 'pg';
import type { RedisTarget } from './connections.js';
import type { EtcdSecurity } from './etcd-connection.js';
import { skip, type CheckResult } from './doctor/check.js';
import { clusterSlotsCheck, failoverCheck, fencesCheck } from './doctor/lease-checks.js';
import { mysqlLeaseDurabilityCheck, mysqlLeaseMigrationsCheck } from './doctor/mysql-lease-checks.js';
import { leaseClockCheck, leaseDurabilityCheck, leaseIdleTimeoutCheck, leaseListenCheck, leaseMigrationsCheck, leaseReplicationCheck } from './doctor/postgres-lease-checks.js';
import { clockCheck, redisDurabilityChecks, sentinelCheck } from './doctor/redis-checks.js';
import { readMysqlLeases } from './status/read-mysql-leases.js';
import { readPostgresLeases } from './status/read-postgres-leases.js';
import { readRedisLeases } from './status/read-redis-leases.js';
import type { LeaseStatus } from './status/status-types.js';

// The lease stores the operators' commands know, one row each: what `--lease-store` takes, what a
// store needs connected, how `fenced status` reads its leases and what `fenced doctor` checks on it.
// `status` and `doctor` dispatch through this table and name no store; a new store is a row here
// (and its folder in @fenced/coordinator).

/** What the commands have connected, as a row reads it. */
export interface LeaseStoreConnections {
  readonly redis: RedisTarget | null;
  readonly etcd?: { readonly client: Etcd3; readonly endpoints?: readonly string[]; readonly prefix: string; readonly security?: EtcdSecurity } | null;
  readonly pool: pg.Pool | null;
  /** MySQL/MariaDB (`--mysql`): the fences, and the leases on the MySQL lease store. */
  readonly mysql?: Mysql2PoolLike | null;
  readonly keyPrefix: string;
  readonly schema: string;
  readonly table: string;
}

export interface LeaseStoreRow {
  /** The store's kind, as `LeaseBackend.kind` says it and `--lease-store` takes it. */
  readonly kind: string;
  /** How messages name it. */
  readonly label: string;
  /** What it needs connected: Redis, the PostgreSQL database, etcd, MySQL/MariaDB. */
  readonly needs: { readonly redis: boolean; readonly database: boolean; readonly etcd: boolean; readonly mysql: boolean };
  /** The heading of `fenced status`'s leases: where they live, and whose clock their times are. */
  heading(keyPrefix: string): string;
  /** Where `fenced status` found no lease. */
  readonly noLeasesYet: string;
  /** Every lease (or `only` these), with the store's clock as `now` where it has one. */
  readLeases(on: LeaseStoreConnections, only: readonly string[] | undefined, history: number): Promise<{ now: number; leases: LeaseStatus[] }>;
  /** The doctor's checks of the store and of the leases on it. */
  doctorChecks(on: LeaseStoreConnections, leases: readonly LeaseStatus[], resources: readonly string[]): Promise<CheckResult[]>;
}

/** The TTL of each lease's last election (what the timing checks compare against). */
const lastTtls = (leases: readonly LeaseStatus[]) => leases.flatMap((l) => (l.elections[0] === undefined ? [] : [l.elections[0].ttlMs]));

const redisRow: LeaseStoreRow = {
  kind: 'redis',
  label: 'Redis',
  needs: { redis: true, database: false, etcd: false, mysql: false },
  heading: (keyPrefix) => `Redis server clock, key prefix ${keyPrefix}`,
  noLeasesYet: 'none found under this prefix',
  readLeases: (on, only, history) => readRedisLeases(on.redis!, on.keyPrefix, only, history),
  async doctorChecks(on, leases, resources) {
    const redis = on.redis!;
    const checks = await redisDurabilityChecks(redis);
    let redisFailoverMs: number | null = null;
    if (redis.kind === 'sentinel') {
      const sentinel = await sentinelCheck(redis, lastTtls(leases));
      checks.push(sentinel.result);
      redisFailoverMs = sentinel.downAfterMs;
    } else {
      checks.push(skip('redis.sentinel', 'not a Sentinel deployment.'));
    }
    if (redis.kind === 'cluster') {
      const timeout = (await redis.client.nodes('master')[0]!.config('GET', 'cluster-node-timeout').catch(() => [])) as string[];
      redisFailoverMs = timeout[1] === undefined ? null : Number(timeout[1]);
    }
    checks.push(await clusterSlotsCheck(redis, on.keyPrefix, leases.map((l) => l.lease), resources));
    checks.push(await clockCheck(redis));
    checks.push(fencesCheck(leases));
    checks.push(failoverCheck(leases, redisFailoverMs));
    return checks;
  },
};

const postgresRow: LeaseStoreRow = {
  kind: 'postgres',
  label: 'PostgreSQL',
  needs: { redis: false, database: true, etcd: false, mysql: false },
  heading: () => 'leases in PostgreSQL (database server clock)',
  noLeasesYet: 'none in the lease table yet',
  readLeases: (on, only, history) => readPostgresLeases(on.pool!, on.schema, on.table, only, history),
  async doctorChecks(on, leases) {
    const pool = on.pool!;
    return [
      await leaseMigrationsCheck(pool, on.schema, on.table),
      await leaseDurabilityCheck(pool),
      await leaseReplicationCheck(pool),
      await leaseIdleTimeoutCheck(pool, lastTtls(leases)),
      await leaseListenCheck(pool),
      await leaseClockCheck(pool),
      fencesCheck(leases),
    ];
  },
};

const etcdRow: LeaseStoreRow = {
  kind: 'etcd',
  label: 'etcd',
  needs: { redis: false, database: false, etcd: true, mysql: false },
  heading: () => "leases in etcd (this host's clock: etcd has none)",
  noLeasesYet: 'none found under this prefix',
  async readLeases(on, only, history) {
    // Loaded only here: etcd3 is an optional peer, absent from deployments without etcd.
    const { readEtcdLeases } = await import('./status/read-etcd-leases.js');
    return readEtcdLeases(on.etcd!.client, on.etcd!.prefix, only, history);
  },
  async doctorChecks(on, leases) {
    const { etcdChecks } = await import('./doctor/etcd-checks.js');
    const etcd = on.etcd!;
    return [...(await etcdChecks(etcd.client, etcd.endpoints ?? [], etcd.security ?? {}, on.pool, lastTtls(leases))), fencesCheck(leases)];
  },
};

const mysqlRow: LeaseStoreRow = {
  kind: 'mysql',
  label: 'MySQL/MariaDB',
  needs: { redis: false, database: false, etcd: false, mysql: true },
  heading: () => 'leases in MySQL/MariaDB (database server clock)',
  noLeasesYet: 'none in the lease table yet',
  readLeases: (on, only, history) => readMysqlLeases(on.mysql!, on.table, only, history),
  async doctorChecks(on, leases) {
    const pool = on.mysql!;
    return [await mysqlLeaseMigrationsCheck(pool, on.table), await mysqlLeaseDurabilityCheck(pool, on.table), fencesCheck(leases)];
  },
};

/** Every lease store, by kind. */
export const leaseStores: ReadonlyMap<string, LeaseStoreRow> = new Map([redisRow, postgresRow, etcdRow, mysqlRow].map((row) => [row.kind, row]));

/** The row of `kind` (one `--lease-store` takes). */
export function leaseStoreRow(kind: string): LeaseStoreRow {
  const row = leaseStores.get(kind);
  if (row === undefined) throw new Error(`unknown lease store ${kind}: one of ${[...leaseStores.keys()].join(', ')}`);
  return row;
}
