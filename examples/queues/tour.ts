/**
 * The tour every queue example takes, against the local PostgreSQL and Redis: a scheduler on a Redis
 * lease dispatches a fire every 500 ms into the queue, two workers apply each fire through the
 * fenced wrapper (one ledger row per fire), then a deposed leader's late copy of a fire and a second
 * delivery of an applied one arrive, and both change nothing. Each example (bullmq.ts,
 * graphile-worker.ts, pg-boss.ts) says only how its queue is set up.
 */
import { randomBytes } from 'node:crypto';
import { createCoordinator, createScheduler, dispatchKey, type QueueLike } from '@fenced/coordinator';
import { createGuard, type Guard } from '@fenced/consumer-guard';
import { createEnvelope, parseToken, type Envelope } from '@fenced/shared';
import { Redis } from 'ioredis';
import pg from 'pg';

export type Status = 'applied' | 'duplicate' | 'stale';

/** What an example is handed to set its queue up. */
export interface QueueSetup {
  readonly databaseUrl: string;
  readonly redisUrl: string;
  /** This run's own schema (the ledger, the guard, and the queue's tables where it has any). */
  readonly schema: string;
  readonly guard: Guard<pg.PoolClient>;
  readonly ledger: string;
  /** Each worker reports each job's status here. */
  onOutcome(status: Status): void;
}

export interface RunningQueue {
  /** Where the scheduler dispatches. */
  readonly target: QueueLike;
  /** Stops the workers and closes the queue's connections. */
  stop(): Promise<void>;
}

const say = (line: string) => process.stdout.write(`${line}\n`);

export async function runQueueTour(name: string, start: (setup: QueueSetup) => Promise<RunningQueue>): Promise<void> {
  const databaseUrl = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
  const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
  const suffix = randomBytes(3).toString('hex');
  const schema = `example_${suffix}`;
  const keyPrefix = `example-${suffix}`;
  const pool = new pg.Pool({ connectionString: databaseUrl });
  // An idle client whose server goes away (a restart, a failover) emits `error` on the pool: without a
  // listener that ends the process. The pool drops that client and connects a new one when asked.
  pool.on('error', (err) => process.stderr.write(`pool: ${err.message}\n`));
  const redis = new Redis(redisUrl);
  const counts: Record<Status, number> = { applied: 0, duplicate: 0, stale: 0 };

  await pool.query(`CREATE SCHEMA ${schema}`);
  try {
    const ledger = `${schema}.ledger`;
    await pool.query(`CREATE TABLE ${ledger} (fire_id text PRIMARY KEY, token bigint NOT NULL)`);
    const guard = createGuard({ db: pool, redis, resource: 'ledger', schema, keyPrefix });
    await guard.migrate();
    const queue = await start({ databaseUrl, redisUrl, schema, guard, ledger, onOutcome: (status) => void counts[status]++ });

    const coordinator = createCoordinator({ redis, lease: 'ledger', keyPrefix, ttlMs: 5_000, renewIntervalMs: 1_000, fences: [guard] });
    // The queue's target, noting what went out (the tour replays the last fire below).
    const dispatched: Envelope[] = [];
    const target: QueueLike = { add: (job, data, options) => (dispatched.push(data as Envelope), queue.target.add(job, data, options)) };
    const scheduler = createScheduler({ coordinator, jobs: { ledger: { everyMs: 500, queue: target } }, misfire: 'skip' });
    scheduler.start();
    await coordinator.start();
    say(`${name}: a scheduler leads with token ${await waitFor(() => coordinator.token())} and enqueues a fire every 500 ms; two workers apply them`);
    await waitFor(() => (counts.applied >= 5 ? true : undefined), 30_000);
    await scheduler.stop();
    await coordinator.stop();

    await waitFor(() => (counts.applied >= dispatched.length ? true : undefined), 30_000);
    say(`  ${counts.applied} fires applied, one ledger row each`);

    // The queue delivers an applied fire a second time (a worker that lost its lock, a retried job).
    // Under its own key: the queue itself drops a second add under the same one.
    const first = dispatched[0]!;
    await queue.target.add('ledger', first, { jobId: `${dispatchKey(first)}#redelivered` });
    await waitFor(() => (counts.duplicate >= 1 ? true : undefined), 30_000);
    say(`  ${first.fireId} delivered again: dropped as a duplicate`);

    // A deposed leader wakes up with its old token and enqueues the next fire, after the next leader
    // was elected (and advanced the fence).
    const last = dispatched.at(-1)!;
    const token = parseToken(last.token);
    await guard.advance(token + 1n);
    const late = createEnvelope({ job: 'ledger', scheduledAt: Date.parse(last.scheduledAt) + 500, token, issuer: 'deposed-node', payload: null });
    await queue.target.add('ledger', late, { jobId: dispatchKey(late) });
    await waitFor(() => (counts.stale >= 1 ? true : undefined), 30_000);
    say(`  a deposed leader (token ${token}; the fence is at ${token + 1n}) enqueues ${late.fireId}: refused as stale`);
    await queue.stop();

    const { rows } = await pool.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${ledger}`);
    say(`  stale refused: ${counts.stale}, duplicate dropped: ${counts.duplicate}, ledger rows: ${rows[0]!.n} (one per applied fire: ${counts.applied})`);
    if (Number(rows[0]!.n) !== counts.applied) throw new Error('the ledger does not hold one row per applied fire');
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    for (const key of await redis.keys(`${keyPrefix}*`)) await redis.del(key);
    redis.disconnect();
    await pool.end();
  }
}

async function waitFor<T>(read: () => T | undefined | null, timeoutMs = 10_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = read();
    if (value !== undefined && value !== null) return value;
    if (performance.now() > deadline) throw new Error(`nothing happened within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
