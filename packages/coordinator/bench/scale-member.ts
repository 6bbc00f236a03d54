/**
 * One process of `pnpm bench:scale`: a lease group member that reports, as JSON lines on stdout,
 * every belief it gains or loses (with this host's wall clock, shared by all members here) and,
 * once a second, its memory and how many leases it leads. It joins when it reads "go" on stdin, so
 * the parent can start several at the same moment.
 */
import { createInterface } from 'node:readline';
import { Cluster, Redis } from 'ioredis';
import { createLeaseGroup, createShardedScheduler } from '@fenced/coordinator';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is required`);
  return value;
};
const name = env('MEMBER');
const ports = env('REDIS_PORTS').split(',').map(Number);
const connectionName = `scale-${name}`;
const redis =
  env('TOPOLOGY') === 'cluster'
    ? new Cluster(ports.map((port) => ({ host: '127.0.0.1', port })), { redisOptions: { connectionName, maxRetriesPerRequest: 1 } })
    : new Redis({ host: '127.0.0.1', port: ports[0]!, connectionName, maxRetriesPerRequest: 1 });
redis.on('error', () => {});

const write = (record: object) => process.stdout.write(`${JSON.stringify(record)}\n`);
const group = createLeaseGroup({
  redis,
  group: 'scale',
  shards: Number(env('LEASES')),
  ttlMs: Number(env('TTL_MS')),
  renewIntervalMs: Number(env('RENEW_MS')),
  keyPrefix: env('KEY_PREFIX'),
  nodeId: name,
});
// A belief ends when its term's signal aborts (synchronously, as the term ends), which can be a
// little before the 'lost' event, emitted on the next tick, reaches us: stamp it there.
group.on('elected', ({ lease, token }) => {
  write({ kind: 'elected', lease, token: String(token), at: Date.now() });
  const signal = group.lease(lease).currentTerm()?.signal;
  signal?.addEventListener('abort', () => write({ kind: 'lost', lease, reason: String((signal.reason as Error).message), at: Date.now() }), { once: true });
});

// A sharded schedule beside the leases: JOBS jobs, each every JOB_EVERY_MS, over JOB_SHARDS shards
// of a second group; what this process dispatched is counted.
const jobCount = Number(process.env['JOBS'] ?? 0);
const jobGroup =
  jobCount > 0
    ? createLeaseGroup({ redis, group: 'scale-jobs', shards: Number(env('JOB_SHARDS')), ttlMs: Number(env('TTL_MS')), renewIntervalMs: Number(env('RENEW_MS')), keyPrefix: env('KEY_PREFIX'), nodeId: name })
    : undefined;
let dispatched = 0;
const scheduler =
  jobGroup === undefined
    ? undefined
    : createShardedScheduler({
        group: jobGroup,
        jobs: Object.fromEntries(Array.from({ length: jobCount }, (_, i) => [`job-${i}`, { everyMs: Number(env('JOB_EVERY_MS')), handler: () => void dispatched++ }])),
        misfire: 'skip',
      });

const input = createInterface({ input: process.stdin });
input.on('line', (line) => {
  if (line.trim() === 'go') void group.start().then(() => write({ kind: 'started', at: Date.now() }));
  if (line.trim() === 'jobs') {
    scheduler?.start();
    void jobGroup?.start();
  }
});
write({ kind: 'ready', at: Date.now() });
setInterval(() => write({ kind: 'stats', rss: process.memoryUsage().rss, led: group.led().length, dispatched, at: Date.now() }), 1000);
process.on('SIGTERM', () => void Promise.all([scheduler?.stop(), group.stop(), jobGroup?.stop()]).finally(() => process.exit(0)));
