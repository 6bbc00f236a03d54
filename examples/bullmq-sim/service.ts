/**
 * A small BullMQ service, one replica of it as its own OS process: every replica runs a scheduler
 * (only the leader dispatches) that enqueues a `settle` job every EVERY_MS into a BullMQ queue, and
 * a BullMQ worker that applies each job: one settlement row per fire.
 *
 * MODE=guarded is the service on fenced: the coordinator's lease and tokens, the scheduler with the
 * queue as its dispatch target, the wrapped handler as the worker's processor. MODE=control is the
 * same queue and worker on the lease alone, as the team ran it before: the leader checks its lease
 * once per tick and enqueues with the fire id as job id; the worker inserts without fence or dedupe.
 *
 * For the simulation it reports JSON lines on stdout (belief, dispatch, write) and takes failpoint
 * commands on stdin, with the plumbing of the ledger simulation (`../ledger-sim`).
 *
 * Env: NODE_NAME, MODE, REDIS_URL, DATABASE_URL, SIM_SCHEMA, KEY_PREFIX, TTL_MS, RENEW_MS, EVERY_MS,
 * WORK_MS (between the pre-check and the write: where mid-write faults land).
 */
import { Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createCoordinator, createScheduler, type QueueLike } from '@fenced/coordinator';
import { createGuard, toProcessor } from '@fenced/consumer-guard';
import type { Envelope } from '@fenced/shared';
import { failpoints } from '@fenced/shared/failpoints';
import { listenForFailpointCommands } from '../ledger-sim/failpoint-commands.js';
import { JOB, LEASE, QUEUE, RESOURCE } from './names.js';
import { env, line, reportLeadership, startControlScheduler, writeUnguarded } from '../sim-support.js';
import { startStarvationProbe } from '@fenced/chaos/replica';

const node = env('NODE_NAME');
const mode = env('MODE');
const everyMs = Number(env('EVERY_MS'));
const workMs = Number(env('WORK_MS'));
const keyPrefix = env('KEY_PREFIX');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
listenForFailpointCommands(line);
// How long this machine keeps the replica off the CPU: the simulation credits it to lateness.
startStarvationProbe(line);

// Short timeouts on the lease's client: a partitioned replica must notice, not hang. BullMQ blocks
// on its own connection, which must retry forever (its requirement).
const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1, connectTimeout: 500, commandTimeout: 1000, retryStrategy: () => 100 });
redis.on('error', () => {});
const queueConnection = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: null, connectTimeout: 500, retryStrategy: () => 100 });
queueConnection.on('error', () => {});
const pool = new pg.Pool({ connectionString: env('DATABASE_URL'), options: `-c search_path=${env('SIM_SCHEMA')}`, max: 4, connectionTimeoutMillis: 1000 });
pool.on('error', () => {});

// Jobs retry (a write that failed with PostgreSQL down), and a job whose worker stopped renewing its
// lock (paused, cut off) goes back to the queue within a second for another worker.
const queue = new Queue(QUEUE, { connection: queueConnection, prefix: keyPrefix, defaultJobOptions: { attempts: 50, backoff: { type: 'fixed', delay: 200 }, removeOnComplete: 1000 } });
queue.on('error', () => {});
const workerOptions = { connection: queueConnection, prefix: keyPrefix, concurrency: 2, lockDuration: 1000, stalledInterval: 500, maxStalledCount: 100 };

const INSERT = `INSERT INTO settlements (fire_id, token, worker, scheduled_at) VALUES ($1, $2, $3, $4)`;
const coordinatorOptions = { redis, lease: LEASE, keyPrefix, ttlMs: Number(env('TTL_MS')), renewIntervalMs: Number(env('RENEW_MS')), acquireRetryMs: 100, nodeId: node };

if (mode === 'guarded') {
  const guard = createGuard({ db: pool, redis, resource: RESOURCE, schema: env('SIM_SCHEMA'), keyPrefix, redisTimeoutMs: 200 });
  const coordinator = createCoordinator({ ...coordinatorOptions, fences: [guard] });
  reportLeadership(coordinator, line);

  // The queue as the scheduler's dispatch target, reporting each dispatch first.
  const target: QueueLike = {
    add(name, data, options) {
      const envelope = data as Envelope;
      const leading = coordinator.currentTerm()?.token === BigInt(envelope.token);
      line({ kind: 'dispatch', fireId: envelope.fireId, token: envelope.token, scheduledAt: Date.parse(envelope.scheduledAt), leading });
      return queue.add(name, data, options);
    },
  };
  const scheduler = createScheduler({ coordinator, jobs: { [JOB]: { everyMs, queue: target } }, misfire: 'all', catchUpWindowMs: 60_000, maxCatchUpFires: 1000, tickMs: 10 });

  const handle = guard.wrapHandler(
    async (_payload, ctx) => {
      line({ kind: 'write', outcome: 'begin', fireId: ctx.fireId, token: ctx.token });
      await sleep(workMs);
      await ctx.guardedWrite((client) => client.query(INSERT, [ctx.fireId, ctx.token.toString(), node, ctx.scheduledAt.toISOString()]));
      line({ kind: 'write', outcome: 'committed', fireId: ctx.fireId, token: ctx.token });
    },
    { onStale: 'return' },
  );
  const process_ = toProcessor(handle);
  const worker = new Worker(
    QUEUE,
    async (job: Job) => {
      const envelope = job.data as Envelope;
      try {
        const status = await process_(job);
        if (status !== 'applied') line({ kind: 'write', outcome: status, fireId: envelope.fireId, token: envelope.token });
        return status;
      } catch (err) {
        // Thrown back to BullMQ, which retries the job (nothing was applied).
        line({ kind: 'write', outcome: 'failed', fireId: envelope.fireId, token: envelope.token, reason: (err as Error).message });
        throw err;
      }
    },
    workerOptions,
  );
  worker.on('error', () => {});
  scheduler.start();
  await coordinator.start();
  process.on('SIGTERM', () => void Promise.allSettled([scheduler.stop(), coordinator.stop(), worker.close()]).finally(() => process.exit(0)));
} else if (mode === 'control') {
  const coordinator = createCoordinator(coordinatorOptions);
  reportLeadership(coordinator, line);
  const stop = startControlScheduler({
    store: { redis },
    keyPrefix,
    lease: LEASE,
    job: JOB,
    everyMs,
    coordinator,
    report: line,
    deliver: async ({ fireId: id, scheduledAt, token }) => {
      await queue.add(JOB, { fireId: id, scheduledAt, token: token.toString() }, { jobId: id });
    },
  });
  const worker = new Worker(
    QUEUE,
    async (job: Job) => {
      const { fireId: id, scheduledAt, token } = job.data as { fireId: string; scheduledAt: number; token: string };
      // The same moments as the guarded run's failpoints, so the same faults land at the same places.
      if (failpoints.armed) await failpoints.hit('handler.prechecked-before-write');
      line({ kind: 'write', outcome: 'begin', fireId: id, token });
      await sleep(workMs);
      await writeUnguarded(pool, { text: INSERT, values: [id, token, node, new Date(scheduledAt).toISOString()] }, { fireId: id, token }, line);
    },
    workerOptions,
  );
  worker.on('error', () => {});
  await coordinator.start();
  process.on('SIGTERM', () => {
    stop();
    void Promise.allSettled([coordinator.stop(), worker.close()]).finally(() => process.exit(0));
  });
} else {
  throw new Error(`MODE must be guarded or control, not ${mode}`);
}
line({ kind: 'ready', mode });
