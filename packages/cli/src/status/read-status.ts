import type { GuardInspection } from '@fenced/consumer-guard/postgres';
import type { Mysql2PoolLike } from '@fenced/consumer-guard/mysql';
import { fenceGuardOn, type FenceDatabase } from '../fence-database.js';
import { createRedisGuard } from '@fenced/consumer-guard/redis';
import type pg from 'pg';
import { scanKeys, type RedisTarget } from '../connections.js';
import { leaseStoreRow } from '../lease-stores.js';
import { fieldsOf } from './read-redis-leases.js';
import type { Etcd3 } from 'etcd3';

export type { ElectionRecord, JobStatus, LeaseStatus } from './status-types.js';
import type { LeaseStatus } from './status-types.js';

export interface Refusal {
  readonly at: string;
  readonly token: string;
  readonly highest: string;
  readonly via: string;
  readonly fireId: string | null;
}

export interface ResourceStatus {
  readonly resource: string;
  /** The PostgreSQL fence (null when no database was given or the resource has no fence there). */
  readonly fence: string | null;
  /** The Redis mark of the fast path (null when Redis holds none). */
  readonly mark: string | null;
  readonly lastAppliedFire: { readonly fireId: string; readonly token: string; readonly appliedAt: string } | null;
  readonly appliedFires: number | null;
  readonly oldestAppliedAt: string | null;
  /** The latest refused writes, newest first. */
  readonly refusals: readonly Refusal[];
}

export interface Status {
  /** When it was read, by the lease store's clock. */
  readonly at: string;
  /** Where the leases live: a lease store's kind (lease-stores.ts). */
  readonly leaseStore: string;
  readonly keyPrefix: string;
  readonly leases: readonly LeaseStatus[];
  readonly resources: readonly ResourceStatus[];
  /** False when no database was given: fences and applied fires are then not shown. */
  readonly database: boolean;
}

export interface StatusSource {
  /** The Redis deployment (leases, marks, refusals); null on the PostgreSQL lease store without a fast path. */
  readonly redis: RedisTarget | null;
  /** Where the leases live: a lease store's kind (lease-stores.ts). @defaultValue `'redis'` */
  readonly leaseStore?: string;
  /** The etcd cluster (`--etcd`) on the etcd lease store, and the key prefix its leases live under. */
  readonly etcd?: { readonly client: Etcd3; readonly prefix: string } | null;
  readonly pool: pg.Pool | null;
  /**
   * Where the fences are, when not in `pool`'s PostgreSQL: MySQL/MariaDB (`--mysql`).
   * @defaultValue the PostgreSQL of `pool`
   */
  readonly mysql?: Mysql2PoolLike | null;
  readonly keyPrefix: string;
  readonly schema: string;
  readonly table: string;
  /** Only these leases (default: every lease found under the prefix). */
  readonly leases?: readonly string[];
  /** How many elections and refusals to show per lease or resource. */
  readonly history?: number;
}

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The latest refusals of every resource named in Redis (every resource that refused a write has a
 * stream of them, each entry naming its resource), read once per stream.
 */
async function refusalsByResource(redis: RedisTarget, keyPrefix: string, history: number): Promise<Map<string, Refusal[]>> {
  const found = new Map<string, Refusal[]>();
  // The stream's key, and the one guards before 0.1.1 wrote (a rolling deploy has both).
  const keys = [...(await scanKeys(redis, `${keyPrefix}:guard-refusals:*`)), ...(await scanKeys(redis, `${keyPrefix}:guard:*::refusals`))];
  for (const key of keys) {
    const entries = await redis.client.xrevrange(key, '+', '-', 'COUNT', history);
    const resource = entries[0] === undefined ? undefined : fieldsOf(entries[0][1])['resource'];
    // A resource with both streams shows the current one (scanned first).
    if (resource === undefined || found.has(resource)) continue;
    found.set(
      resource,
      entries.map(([id, flat]) => {
        const f = fieldsOf(flat);
        return { at: iso(Number(id.split('-')[0])), token: f['token'] ?? '?', highest: f['highest'] ?? '?', via: f['via'] ?? '?', fireId: f['fire'] ? f['fire'] : null };
      }),
    );
  }
  return found;
}

/** Everything `fenced status` shows, read from Redis and (when given) PostgreSQL. */
export async function readStatus(source: StatusSource): Promise<Status> {
  return (await collectStatus(source)).status;
}

/** The status, and the installation's inspection it was built from (null without a database). */
export async function collectStatus(source: StatusSource): Promise<{ status: Status; inspection: GuardInspection | null }> {
  const history = source.history ?? 10;
  const leaseStore = source.leaseStore ?? 'redis';
  const row = leaseStoreRow(leaseStore);
  if (row.needs.redis && source.redis === null) throw new Error(`the ${row.label} lease store needs Redis`);
  if (row.needs.database && source.pool === null) throw new Error(`the ${row.label} lease store needs the database`);
  if (row.needs.etcd && source.etcd == null) throw new Error(`the ${row.label} lease store needs etcd`);
  if (row.needs.mysql && source.mysql == null) throw new Error(`the ${row.label} lease store needs MySQL/MariaDB (--mysql or MYSQL_URL)`);
  const { now, leases } = await row.readLeases(source, source.leases, history);

  const fences: FenceDatabase | null =
    source.mysql !== undefined && source.mysql !== null ? { kind: 'mysql', pool: source.mysql } : source.pool === null ? null : { kind: 'postgres', pool: source.pool };
  const inspection = fences === null ? null : await fenceGuardOn(fences, 'fenced-cli', source).inspect();
  // The refusals stream and the marks are the Redis fast path's: none without Redis.
  const refusals = source.redis === null ? new Map<string, Refusal[]>() : await refusalsByResource(source.redis, source.keyPrefix, history);
  const resourceNames = new Set([...(inspection?.fences.map((f) => f.resource) ?? []), ...refusals.keys()]);
  const resources: ResourceStatus[] = [];
  for (const resource of [...resourceNames].sort()) {
    const fence = inspection?.fences.find((f) => f.resource === resource);
    const mark = source.redis === null ? null : await createRedisGuard({ redis: source.redis.client, resource, keyPrefix: source.keyPrefix }).highest();
    resources.push({
      resource,
      fence: fence?.token.toString() ?? null,
      mark: mark?.toString() ?? null,
      lastAppliedFire:
        fence?.lastAppliedFire == null
          ? null
          : { fireId: fence.lastAppliedFire.fireId, token: fence.lastAppliedFire.token.toString(), appliedAt: fence.lastAppliedFire.appliedAt.toISOString() },
      appliedFires: fence?.appliedFires ?? null,
      oldestAppliedAt: fence?.oldestAppliedAt?.toISOString() ?? null,
      refusals: refusals.get(resource) ?? [],
    });
  }
  return { status: { at: iso(now), leaseStore, keyPrefix: source.keyPrefix, leases, resources, database: inspection !== null }, inspection };
}
