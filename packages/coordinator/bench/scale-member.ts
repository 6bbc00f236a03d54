/**
 * One process of `pnpm bench:scale`: a lease group member that reports, as JSON lines on stdout,
 * every belief it gains or loses (with this host's wall clock, shared by all members here) and,
 * once a second, its memory and how many leases it leads. It joins when it reads "go" on stdin, so
 * the parent can start several at the same moment; on "heap" it collects garbage (run it with
 * --expose-gc) and reports the heap left, so the parent can see whether it grows over cycles.
 */
import { createInterface } from 'node:readline';
import { Cluster, Redis } from 'ioredis';
import pg from 'pg';
import { createLeaseGroup, createShardedScheduler, redisLeases, type LeaseBackend, type LeaseGroup, type ShardedScheduler } from '@fenced/coordinator';
import { postgresLeases } from '@fenced/coordinator/postgres';
import { etcdLeases } from '@fenced/coordinator/etcd';
import { mysqlLeases } from '@fenced/coordinator/mysql';
import mysql from 'mysql2/promise';
import { Etcd3 } from 'etcd3';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is required`);
  return value;
};
const name = env('MEMBER');
const connectionName = `scale-${name}`;
const topology = env('TOPOLOGY');

/** The lease store: Redis (a server or a Cluster), PostgreSQL (a pool named after this member), MySQL, or etcd. */
function store(): LeaseBackend {
  if (topology === 'etcd') {
    const client = new Etcd3({ hosts: env('ETCD_ENDPOINTS').split(','), dialTimeout: 2000 });
    return etcdLeases({ client, prefix: `${env('KEY_PREFIX')}/` });
  }
  if (topology === 'mysql') {
    // The MySQL store's pool, as its README has it: the guard's, four connections.
    return mysqlLeases({ pool: mysql.createPool({ uri: env('MYSQL_URL'), connectionLimit: 4 }) });
  }
  if (topology === 'postgres') {
    const pool = new pg.Pool({ connectionString: env('DATABASE_URL'), max: 4, application_name: connectionName });
    pool.on('error', () => {});
    return postgresLeases({ pool, schema: env('SCHEMA') });
  }
  const ports = env('REDIS_PORTS').split(',').map(Number);
  const redis =
    topology === 'cluster'
      ? new Cluster(ports.map((port) => ({ host: '127.0.0.1', port })), { redisOptions: { connectionName, maxRetriesPerRequest: 1 } })
      : new Redis({ host: '127.0.0.1', port: ports[0]!, connectionName, maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  return redisLeases(redis, { keyPrefix: env('KEY_PREFIX') });
}
const leases = store();

const write = (record: object) => process.stdout.write(`${JSON.stringify(record)}\n`);
// The floor of the memory figure: this process with its modules loaded and nothing made yet.
write({ kind: 'loaded', rss: process.memoryUsage().rss, at: Date.now() });
const group = createLeaseGroup({
  store: leases,
  group: 'scale',
  shards: Number(env('LEASES')),
  ttlMs: Number(env('TTL_MS')),
  renewIntervalMs: Number(env('RENEW_MS')),
  nodeId: name,
});
// A belief ends when its term's signal aborts (synchronously, as the term ends), which can be a
// little before the 'lost' event, emitted on the next tick, reaches us: stamp it there.
group.on('elected', ({ lease, token }) => {
  write({ kind: 'elected', lease, token: String(token), at: Date.now() });
  const signal = group.lease(lease).currentTerm()?.signal;
  signal?.addEventListener('abort', () => write({ kind: 'lost', lease, reason: String((signal.reason as Error).message), at: Date.now() }), { once: true });
});

// A sharded schedule beside the leases, made only when the parent asks for it (so the memory
// measured before is the lease group's alone): JOBS jobs, each every JOB_EVERY_MS, over JOB_SHARDS
// shards of a second group; what this process dispatched is counted.
const jobCount = Number(process.env['JOBS'] ?? 0);
let dispatched = 0;
let jobGroup: LeaseGroup | undefined;
let scheduler: ShardedScheduler | undefined;
function startJobs(): void {
  if (jobCount === 0 || jobGroup !== undefined) return;
  jobGroup = createLeaseGroup({ store: leases, group: 'scale-jobs', shards: Number(env('JOB_SHARDS')), ttlMs: Number(env('TTL_MS')), renewIntervalMs: Number(env('RENEW_MS')), nodeId: name });
  scheduler = createShardedScheduler({
    group: jobGroup,
    jobs: Object.fromEntries(Array.from({ length: jobCount }, (_, i) => [`job-${i}`, { everyMs: Number(env('JOB_EVERY_MS')), handler: () => void dispatched++ }])),
    misfire: 'skip',
  });
  scheduler.start();
  void jobGroup.start();
}

const input = createInterface({ input: process.stdin });
input.on('line', (line) => {
  if (line.trim() === 'go') void group.start().then(() => write({ kind: 'started', at: Date.now() }));
  if (line.trim() === 'heap') {
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    write({ kind: 'heap', heapUsed: gc === undefined ? null : process.memoryUsage().heapUsed, at: Date.now() });
  }
  if (line.trim() === 'jobs') startJobs();
});
write({ kind: 'ready', at: Date.now() });
setInterval(() => write({ kind: 'stats', rss: process.memoryUsage().rss, led: group.led().length, jobShardsLed: jobGroup?.led().length ?? 0, dispatched, at: Date.now() }), 1000);
process.on('SIGTERM', () => void Promise.all([scheduler?.stop(), group.stop(), jobGroup?.stop()]).finally(() => process.exit(0)));
