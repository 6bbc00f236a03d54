/**
 * One replica of the simulated scheduler, as its own OS process: a cron job every EVERY_MS writes a
 * ledger row per fire. MODE=guarded runs it on fenced (fences advanced at election, server-clock
 * schedule, guarded handler with exactly-once effects); MODE=control runs the same job with the lease
 * alone (see naive-scheduler.ts).
 *
 * It reports on stdout, one JSON object per line: belief (elected/lost), dispatch, write (begin,
 * committed, stale, duplicate, failed). The supervisor in @fenced/chaos turns them into a history.
 *
 * With LEASE_STORE=postgres the lease, the scheduler's record and the fences all live in the one
 * PostgreSQL database (behind this replica's fault proxy), the guard runs without Redis and checks
 * each write's lease in its own transaction; the control keeps only its own record in Redis.
 *
 * With LEASE_STORE=etcd the lease and the scheduler's record live in the run's etcd cluster (each
 * member behind this replica's own fault proxy, ETCD_ENDPOINTS), due times come from PostgreSQL's
 * clock (postgresClock: etcd has none), and the guard runs on PostgreSQL alone.
 *
 * With LEASE_STORE=mysql the lease and the scheduler's record live in the run's MariaDB (behind this
 * replica's own fault proxy, MYSQL_URL), due times come from its clock, and the guard runs on
 * PostgreSQL alone: the election's advance of the fence is what refuses a deposed leader's writes.
 *
 * Env: NODE_NAME, MODE, LEASE_STORE, MYSQL_URL (on the MySQL store), POSTGRES_MEMBERS (JSON list of URLs, optional), REDIS_ENDPOINT (JSON, see redis-endpoint.ts), DATABASE_URL, SIM_SCHEMA, KEY_PREFIX, TTL_MS, RENEW_MS, EVERY_MS,
 * WORK_MS (time between the dispatch and the write: where mid-write faults land), POST_COMMIT_MS
 * (time between the commit and the scheduler's record: where a crash re-dispatches a fire).
 */
import pg from 'pg';
import { createGuard } from '@fenced/consumer-guard';
import { createRedisGuard } from '@fenced/consumer-guard/redis';
import { createCoordinator, createScheduler, redisLeases } from '@fenced/coordinator';
import { postgresClock, postgresLeases } from '@fenced/coordinator/postgres';
import { etcdLeases } from '@fenced/coordinator/etcd';
import { mysqlLeases } from '@fenced/coordinator/mysql';
import mysql from 'mysql2/promise';
import { Etcd3 } from 'etcd3';
import { circuitBreaker, ConsecutiveBreaker, handleAll } from 'cockatiel';
import { failpoints } from '@fenced/shared/failpoints';
import { listenForFailpointCommands } from './failpoint-commands.js';
import { INSERT_SQL, JOB, LEASE, RESOURCE } from './ledger.js';
import { connectRedis, parseRedisEndpoint } from './redis-endpoint.js';
import { env, line, reportLeadership, startControlScheduler, writeUnguarded } from '../sim-support.js';
import { startStarvationProbe } from '@fenced/chaos/replica';

const node = env('NODE_NAME');
const mode = env('MODE');
const schema = env('SIM_SCHEMA');
const ttlMs = Number(env('TTL_MS'));
const everyMs = Number(env('EVERY_MS'));
const workMs = Number(env('WORK_MS'));
const postCommitMs = Number(env('POST_COMMIT_MS'));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** `promise`, or a rejection after `ms`. */
const withinMs = <T>(ms: number, promise: Promise<T>): Promise<T> =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms).unref())]);


// The run's Redis: none on a machine without it, where only the runs that need none are run (app.ts, usesRedis).
const redisEndpoint = process.env['REDIS_ENDPOINT'];
const redis = redisEndpoint === undefined ? undefined : connectRedis(parseRedisEndpoint(redisEndpoint));
redis?.on('error', () => {});
const needRedis = () => {
  if (redis === undefined) throw new Error('the leases live in Redis, and REDIS_ENDPOINT is not set');
  return redis;
};
const POOL_SIZE = 4;
const pool = new pg.Pool({
  connectionString: env('DATABASE_URL'),
  options: `-c search_path=${schema}`,
  max: POOL_SIZE,
  connectionTimeoutMillis: 1000,
});
pool.on('error', () => {});

/**
 * The pool-exhausted fault: other work of this process (a slow report, say) takes every connection
 * of the pool for `ms`, so the guard's writes wait for one and time out (the pool's own timeout).
 */
async function holdPool(ms: number): Promise<void> {
  const taken = await Promise.allSettled(Array.from({ length: POOL_SIZE }, () => pool.connect()));
  const clients = taken.flatMap((t) => (t.status === 'fulfilled' ? [t.value] : []));
  // A checked-out client has no error listener from the pool: whoever holds it listens until release.
  const broken = new Map<pg.PoolClient, Error>();
  for (const client of clients) client.on('error', (err) => broken.set(client, err));
  const release = () => {
    for (const client of clients) client.release(broken.get(client));
  };
  if (clients.length < POOL_SIZE) {
    release();
    line({ kind: 'pool-not-held', connections: clients.length });
    return;
  }
  line({ kind: 'pool-held', connections: clients.length });
  await sleep(ms);
  release();
  line({ kind: 'pool-released' });
}

listenForFailpointCommands(line, {}, { 'hold-pool': (command) => void holdPool(Number(command['ms'])) });
// How long this machine keeps the replica off the CPU: the simulation credits it to lateness.
startStarvationProbe(line);

const onPostgres = env('LEASE_STORE') === 'postgres';
const onEtcd = env('LEASE_STORE') === 'etcd';
const onMysql = env('LEASE_STORE') === 'mysql';
// On a replicated PostgreSQL (the postgres-failover scenario): a pool per member, each reaching its
// server directly, so that the guarded run's lease store counts grants and renewals only from the
// primary on the cluster's latest timeline. The control goes without.
const members = mode === 'guarded' ? (JSON.parse(process.env['POSTGRES_MEMBERS'] ?? '[]') as string[]) : [];
const memberPools = members.map((url) => {
  const member = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis: 1000 });
  member.on('error', () => {});
  return member;
});
const store = onPostgres
  ? postgresLeases({ pool, schema, takeover: { graceMs: 250, timeoutMs: 10_000 }, ...(memberPools.length > 0 ? { confirmPrimary: { members: memberPools } } : {}) })
  : onEtcd
    ? etcdLeases({
        // etcd3's default circuit breaker holds a failed member back for 5 s: after an outage of the
        // cluster every member is held back, and the first leader waits for it. Half a second here.
        client: new Etcd3({
          hosts: env('ETCD_ENDPOINTS').split(','),
          dialTimeout: 1000,
          faultHandling: { host: () => circuitBreaker(handleAll, { halfOpenAfter: 500, breaker: new ConsecutiveBreaker(3) }) },
        }),
        prefix: `${schema}/`,
        clock: postgresClock(pool),
      })
    : onMysql
      ? mysqlLeases({ pool: mysql.createPool({ uri: env('MYSQL_URL'), connectionLimit: POOL_SIZE, connectTimeout: 1000 }) })
      : redisLeases(needRedis(), { keyPrefix: env('KEY_PREFIX') });
const coordinatorOptions = { store, lease: LEASE, ttlMs, renewIntervalMs: Number(env('RENEW_MS')), acquireRetryMs: 100, nodeId: node };

async function writeRow(client: pg.PoolClient, fire: { fireId: string; token: bigint; scheduledAt: string }): Promise<void> {
  await client.query(INSERT_SQL, [RESOURCE, fire.fireId, fire.token.toString(), node, fire.scheduledAt]);
}

if (mode === 'guarded') {
  const guard = createGuard({
    db: pool,
    resource: RESOURCE,
    schema,
    // On the PostgreSQL store: no Redis at all, and every write checks its lease in its own transaction.
    // On etcd and MySQL: the guard on PostgreSQL alone (no Redis in that deployment).
    ...(onPostgres ? { checkLease: LEASE } : onEtcd || onMysql ? {} : { redis: needRedis(), keyPrefix: env('KEY_PREFIX'), redisTimeoutMs: 200 }),
    // The simulation counts the election-time advance ending a deposed leader's frozen transaction.
    logger: (e) => {
      if (e.type === 'guard.takeover') line({ kind: 'takeover', ended: e.ended, token: e.token, blockingToken: e.blockingToken });
    },
  });
  const coordinator = createCoordinator({
    ...coordinatorOptions,
    fences: [guard],
    // On PostgreSQL the election itself ends the frozen writes of the term before it (the lease row).
    logger: (e) => {
      if (e.type === 'lease.takeover') line({ kind: 'takeover', ended: true, count: e.ended });
      // A grant or renewal refused by the primary confirmation: from a deposed PostgreSQL primary, or
      // from a Redis server the sentinels do not all name (Redis says which).
      if (e.type === 'lease-store.error' && (e.error as Error | undefined)?.name === 'NotOnPrimaryError') {
        const server = (e.error as { server?: unknown }).server;
        line({ kind: 'deposed', operation: e.operation, ...(typeof server === 'string' ? { server } : {}) });
      }
    },
  });
  const mark = onPostgres || onEtcd || onMysql ? undefined : createRedisGuard({ redis: needRedis(), resource: RESOURCE, keyPrefix: env('KEY_PREFIX') });
  // Per fire in flight: the highest token the guard's mark held just before the handler was called.
  const knownBefore = new Map<string, bigint>();
  reportLeadership(coordinator, line);
  const handle = guard.wrapHandler(
    async (_payload, ctx) => {
      const highestBefore = knownBefore.get(ctx.fireId);
      knownBefore.delete(ctx.fireId);
      line({ kind: 'write', outcome: 'begin', fireId: ctx.fireId, token: ctx.token, ...(highestBefore === undefined ? {} : { highestBefore }) });
      await sleep(workMs);
      await ctx.guardedWrite((client) => writeRow(client, { fireId: ctx.fireId, token: ctx.token, scheduledAt: ctx.scheduledAt.toISOString() }));
      line({ kind: 'write', outcome: 'committed', fireId: ctx.fireId, token: ctx.token });
      await sleep(postCommitMs);
    },
    { onStale: 'return' },
  );
  const scheduler = createScheduler({
    coordinator,
    jobs: {
      [JOB]: {
        everyMs,
        handler: async (envelope) => {
          // For the simulation's layer checks: whether this replica's own lease is current with the
          // envelope's token at the moment of dispatch (read before anything is awaited), and (on
          // the handler's begin line) the highest token the guard's mark held before it was called.
          const leading = coordinator.currentTerm()?.token === BigInt(envelope.token);
          line({ kind: 'dispatch', fireId: envelope.fireId, token: envelope.token, scheduledAt: Date.parse(envelope.scheduledAt), leading });
          const highestBefore = mark === undefined ? undefined : await withinMs(200, mark.highest()).catch(() => undefined);
          if (highestBefore != null) knownBefore.set(envelope.fireId, highestBefore);
          // The handler as the coordinator's README shows it (`handler: (envelope) => handle(envelope)`):
          // no retry of its own. The scheduler reads what it returns or throws, and dispatches a fire
          // whose write failed (PostgreSQL unreachable: nothing applied) again until it takes effect,
          // is refused, or the term ends. The lines around it are the simulation's instrumentation.
          try {
            const outcome = await handle(envelope);
            if (outcome.status !== 'applied') line({ kind: 'write', outcome: outcome.status, fireId: envelope.fireId, token: envelope.token });
            return outcome;
          } catch (err) {
            line({ kind: 'write', outcome: 'failed', fireId: envelope.fireId, token: envelope.token, reason: (err as Error).message });
            throw err;
          } finally {
            knownBefore.delete(envelope.fireId); // a fire refused before its handler began leaves one
            // The job is free for its next fire: the checker credits a catch-up with this busy time.
            line({ kind: 'handled', fireId: envelope.fireId });
          }
        },
      },
    },
    // After Redis lost its data, the scheduler resumes from the fires the guard applied (its fence
    // is the coordinator's), without a hook.
    misfire: 'all',
    catchUpWindowMs: 60_000,
    maxCatchUpFires: 1000,
    tickMs: 10,
  });
  scheduler.start();
  await coordinator.start();
  // The scheduler first: its fires in flight finish while the lease is still held (a lease-checked
  // write after the release would be refused, and its fire left to a next leader that may never come).
  process.on('SIGTERM', () => void scheduler.stop().catch(() => undefined).then(() => coordinator.stop()).finally(() => process.exit(0)));
} else if (mode === 'control') {
  const coordinator = createCoordinator(coordinatorOptions);
  reportLeadership(coordinator, line);
  const stop = startControlScheduler({
    // The control's record beside its lease: in Redis, or in PostgreSQL where the run has no Redis.
    store: redis === undefined ? { pool } : { redis },
    keyPrefix: env('KEY_PREFIX'),
    lease: LEASE,
    job: JOB,
    everyMs,
    coordinator,
    report: line,
    // The same moments as the guarded run's failpoints, so that the same faults land at the same places.
    deliver: async ({ fireId: id, scheduledAt, token }) => {
      if (failpoints.armed) await failpoints.hit('handler.prechecked-before-write');
      line({ kind: 'write', outcome: 'begin', fireId: id, token });
      await sleep(workMs);
      await writeUnguarded(pool, { text: INSERT_SQL, values: [RESOURCE, id, token.toString(), node, new Date(scheduledAt).toISOString()] }, { fireId: id, token }, line);
      await sleep(postCommitMs);
    },
  });
  await coordinator.start();
  process.on('SIGTERM', () => {
    stop();
    void coordinator.stop().finally(() => process.exit(0));
  });
} else {
  throw new Error(`MODE must be guarded or control, not ${mode}`);
}
line({ kind: 'ready', mode, ttlMs });
