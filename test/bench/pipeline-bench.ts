/**
 * pnpm bench:pipeline — the whole path, end to end: a scheduler on a Redis lease dispatches every
 * fire of `--jobs` jobs (each every second) into a queue, workers apply each fire to PostgreSQL. For
 * BullMQ, graphile-worker and pg-boss in turn, two pipelines side by side in one run:
 *   guarded    the fenced scheduler (fenced at election) → queue → the wrapped handler (pre-check,
 *              fence check and fire claim in the write's transaction)
 *   unguarded  the same scheduler with no fence (a lease alone) → the same queue → a bare handler
 *              doing the same INSERT in a plain transaction (for pg-boss, in the batch's transaction
 *              of the same transactional worker): what a team runs with a lease alone
 * and, for pg-boss, two more:
 *   floor         the unguarded pipeline plus the one write the guard cannot do without: each fire's
 *                 claim row (one multi-row INSERT per batch into a table shaped like the guard's
 *                 applied-fires table), so a redelivered fire applies once. The floor of the design:
 *                 what guarded costs beyond it is the check itself
 *   guarded-1by1  the batch's jobs checked one at a time under a savepoint each (what the adapter
 *                 did before it checked a whole batch at once),
 * and prints, per pipeline, the fires dispatched and applied per second and each fire's end-to-end
 * lateness (commit time minus due time, by the Redis server's clock) over `--seconds` after a warm-up.
 *
 * Each pipeline runs twice per round, in mirrored order (A B C C B A), and its figures are all its
 * runs' (rates averaged, lateness over every fire): a variant always measured last would pay for the
 * others' leftovers in the database. More rounds (--rounds) narrow a ratio on a noisy machine.
 *
 * Flags: --jobs N (default 300), --seconds S (default 8), --rounds R (default 1),
 * --queues bullmq,graphile-worker,pg-boss, --json.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Queue, Worker } from 'bullmq';
import { Logger, makeWorkerUtils, run as runGraphileWorker } from 'graphile-worker';
import { PgBoss } from 'pg-boss';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createCoordinator, createScheduler, graphileWorkerQueue, pgBossQueue, type QueueLike } from '@fenced/coordinator';
import { createGuard, toGraphileTask, toPgBossHandler, toProcessor } from '@fenced/consumer-guard';
import type { Envelope, FencedEvent } from '@fenced/shared';

const { values: args } = parseArgs({
  options: {
    jobs: { type: 'string', default: '300' },
    seconds: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '1' },
    queues: { type: 'string', default: 'bullmq,graphile-worker,pg-boss' },
    json: { type: 'boolean', default: false },
  },
});
const jobCount = Number(args.jobs);
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
const queues = args.queues.split(',').map((q) => q.trim());
if (!(jobCount >= 1) || !(seconds > 0) || !Number.isInteger(rounds) || rounds < 1 || queues.some((q) => !['bullmq', 'graphile-worker', 'pg-boss'].includes(q))) {
  process.stderr.write('usage: bench:pipeline [--jobs N] [--seconds S] [--rounds R] [--queues bullmq,graphile-worker,pg-boss] [--json]\n');
  process.exit(2);
}

const databaseUrl = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const suffix = randomBytes(3).toString('hex');
const schema = `pipe_${suffix}`;
const keyPrefix = `pipe-${suffix}`;
const WARMUP_MS = 2000;
const CONCURRENCY = 16;
// pg-boss hands each worker a batch in one transaction (the guarded handler writes them all in it).
const PG_BOSS_WORKERS = 16;
const PG_BOSS_BATCH = 50;

const pool = new pg.Pool({ connectionString: databaseUrl, max: CONCURRENCY + 4 });
pool.on('error', () => {});
const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
redis.on('error', () => {});

/**
 * pg-boss only: `floor`, the unguarded batch plus each fire's claim row (the guard's one unavoidable
 * write); `guarded-1by1`, its batch's jobs checked one at a time (a savepoint each), as before the
 * batch check.
 */
type Variant = 'guarded' | 'unguarded' | 'floor' | 'guarded-1by1';

/** graphile-worker's schemas, one per run, dropped at the end. */
const gwSchemas: string[] = [];

/** Milliseconds to add to Date.now() to read the Redis server's clock (the one due times come from). */
async function serverOffset(): Promise<number> {
  let best = { rtt: Infinity, offset: 0 };
  for (let i = 0; i < 20; i++) {
    const sent = Date.now();
    const t0 = performance.now();
    const [s, us] = await redis.time();
    const rtt = performance.now() - t0;
    if (rtt < best.rtt) best = { rtt, offset: Number(s) * 1000 + Number(us) / 1000 - (sent + rtt / 2) };
  }
  return best.offset;
}

/** Lateness of each fire applied inside the measured window, and how many were applied in it. */
class Meter {
  readonly lateness: number[] = [];
  applied = 0;
  constructor(
    private readonly offset: number,
    readonly from: number,
    readonly until: number,
  ) {}
  /** Every fire applied over the whole run, warm-up included (what the run's WAL was written for). */
  appliedInRun = 0;
  note(scheduledAt: string): void {
    this.appliedInRun++;
    const now = Date.now() + this.offset;
    if (now < this.from || now > this.until) return;
    this.applied++;
    this.lateness.push(now - Date.parse(scheduledAt));
  }
}

const pct = (xs: number[], q: number) => (xs.length === 0 ? NaN : [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!);

/** The bare handler: the same INSERT in a plain transaction, nothing around it. */
async function bareInsert(table: string, envelope: Envelope): Promise<void> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query(`INSERT INTO ${table} (fire_id, token) VALUES ($1, $2)`, [envelope.fireId, envelope.token]);
    await c.query('COMMIT');
  } finally {
    c.release();
  }
}

interface Consumer {
  readonly target: QueueLike;
  stop(): Promise<void>;
}

/**
 * Every job's fires into the one queue (graphile-worker and pg-boss name the task or queue after
 * what is added; the scheduler adds each fire under its job's name).
 */
function intoOne(target: QueueLike, name: string): QueueLike {
  return { add: (_job, data, options) => target.add(name, data, options) };
}

/** Workers of `queue` applying each fire to `table`, guarded or bare, reporting each applied fire. */
async function startConsumer(queue: string, variant: Variant, table: string, resource: string, onApplied: (envelope: Envelope) => void): Promise<Consumer> {
  const guard = createGuard({ db: pool, redis, resource, schema, keyPrefix });
  const handle = guard.wrapHandler(
    (_payload, ctx) => ctx.guardedWrite((client) => client.query(`INSERT INTO ${table} (fire_id, token) VALUES ($1, $2)`, [ctx.fireId, ctx.token.toString()])),
    { onStale: 'return' },
  );
  const name = `pipe_${variant.replace(/-/g, '_')}`;
  if (queue === 'bullmq') {
    const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
    const prefix = `${keyPrefix}-bull`;
    const q = new Queue(name, { connection, prefix });
    const processor = toProcessor(handle);
    const worker = new Worker(
      name,
      async (job) => {
        const envelope = job.data as Envelope;
        if (variant === 'guarded') {
          const status = await processor(job);
          if (status === 'applied') onApplied(envelope);
          return status;
        }
        await bareInsert(table, envelope);
        onApplied(envelope);
        return 'applied';
      },
      { connection: new Redis(redisUrl, { maxRetriesPerRequest: null }), prefix, concurrency: CONCURRENCY, removeOnComplete: { count: 0 } },
    );
    return {
      target: intoOne(q, name),
      async stop() {
        await worker.close();
        await q.obliterate({ force: true });
        await q.close();
        connection.disconnect();
      },
    };
  }
  if (queue === 'graphile-worker') {
    // A schema per run, dropped when the benchmark ends: a stopped runner's last queries must not
    // meet a schema dropped under them (an unheard error there ends the process).
    const gwSchema = `${schema}_gw_${gwSchemas.length}`;
    gwSchemas.push(gwSchema);
    const logger = new Logger(() => () => {});
    const utils = await makeWorkerUtils({ connectionString: databaseUrl, schema: gwSchema, logger });
    await utils.migrate();
    const task = toGraphileTask(async (envelope, call) => {
      const outcome = await handle(envelope, call);
      if (outcome.status === 'applied') onApplied(envelope as Envelope);
      return outcome;
    });
    const runner = await runGraphileWorker({
      connectionString: databaseUrl,
      schema: gwSchema,
      concurrency: CONCURRENCY,
      noHandleSignals: true,
      pollInterval: 100,
      logger,
      taskList: {
        [name]:
          variant === 'guarded'
            ? task
            : async (payload) => {
                await bareInsert(table, payload as Envelope);
                onApplied(payload as Envelope);
              },
      },
    });
    return {
      target: intoOne(graphileWorkerQueue(utils), name),
      async stop() {
        await runner.stop();
        await utils.release();
      },
    };
  }
  // pg-boss set up for throughput: 16 workers (as the other queues have) fetching batches, and
  // fetching again at once while batches come back full. Polling alone (4 workers, every 0.5 s) held
  // it near 200-400 fires/s whatever the handler; LISTEN/NOTIFY made no difference here.
  const boss = new PgBoss({ connectionString: databaseUrl, schema: `${schema}_boss`, schedule: false });
  boss.on('error', () => {});
  await boss.start();
  await boss.createQueue(name);
  const transactional = toPgBossHandler(
    guard.wrapTransactionalHandler((_payload, ctx) =>
      ctx.guardedWrite((tx) => tx.executeSql(`INSERT INTO ${table} (fire_id, token) VALUES ($1, $2)`, [ctx.fireId, ctx.token.toString()])),
    ),
  );
  const polling = { localConcurrency: PG_BOSS_WORKERS, batchSize: PG_BOSS_BATCH, pollingIntervalSeconds: 0.5, burstWhenBatchFull: true };
  if (variant === 'guarded') {
    await boss.work(name, { ...polling, transactional: true }, async (jobs, tx) => {
      const statuses = await transactional(jobs, tx);
      statuses.forEach((status, j) => status === 'applied' && onApplied(jobs[j]!.data as Envelope));
      return statuses;
    });
  } else if (variant === 'guarded-1by1') {
    const oneAtATime = guard.wrapTransactionalHandler((_payload, ctx) =>
      ctx.guardedWrite((tx) => tx.executeSql(`INSERT INTO ${table} (fire_id, token) VALUES ($1, $2)`, [ctx.fireId, ctx.token.toString()])),
    );
    await boss.work(name, { ...polling, transactional: true }, async (jobs, tx) => {
      for (const job of jobs) if ((await oneAtATime(job.data, tx)).status === 'applied') onApplied(job.data as Envelope);
    });
  } else {
    // Like for like: the same transactional worker, each job's INSERT in the batch's transaction;
    // the floor adds the batch's claim rows in one statement, as the guard's batch check inserts them.
    const claims = variant === 'floor' ? await createClaimTable(table) : undefined;
    await boss.work(name, { ...polling, transactional: true }, async (jobs, tx) => {
      const envelopes = jobs.map((job) => job.data as Envelope);
      if (claims !== undefined) {
        await tx.executeSql(`INSERT INTO ${claims} (resource, fire_id, token) SELECT $1, f, t FROM unnest($2::text[], $3::bigint[]) AS u(f, t) ON CONFLICT DO NOTHING`, [
          resource,
          envelopes.map((e) => e.fireId),
          envelopes.map((e) => e.token),
        ]);
      }
      for (const envelope of envelopes) await tx.executeSql(`INSERT INTO ${table} (fire_id, token) VALUES ($1, $2)`, [envelope.fireId, envelope.token]);
      for (const envelope of envelopes) onApplied(envelope);
    });
  }
  return {
    target: intoOne(pgBossQueue(boss), name),
    async stop() {
      await boss.stop({ graceful: false, close: true });
    },
  };
}

/**
 * The floor's claims table, shaped as the guard's applied-fires table is (its key, its columns, the
 * BRIN index on applied_at), so a claim row costs the floor what it costs the guard.
 */
async function createClaimTable(table: string): Promise<string> {
  const claims = `${table}_claims`;
  await pool.query(
    `CREATE TABLE ${claims} (resource text NOT NULL, fire_id text NOT NULL, token bigint NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(), outcome text, PRIMARY KEY (resource, fire_id))`,
  );
  await pool.query(`CREATE INDEX ON ${claims} USING brin (applied_at)`);
  return claims;
}

/** One run of one pipeline: what it dispatched and applied in the window, each fire's lateness, this process's CPU. */
async function runPipeline(queue: string, variant: Variant, round: number, offset: number) {
  const table = `${schema}.${queue.replace('-', '_')}_${variant.replace('-', '_')}_${round}`;
  await pool.query(`CREATE TABLE ${table} (fire_id text PRIMARY KEY, token bigint NOT NULL)`);
  const resource = `${queue}-${variant}-${round}`;
  const start = Date.now() + offset;
  const meter = new Meter(offset, start + WARMUP_MS, start + WARMUP_MS + seconds * 1000);
  const consumer = await startConsumer(queue, variant, table, resource, (e) => meter.note(e.scheduledAt));
  const fence = variant === 'guarded' ? [createGuard({ db: pool, redis, resource, schema, keyPrefix })] : [];
  const coordinator = createCoordinator({ redis, lease: `${queue}-${variant}-${round}`, keyPrefix, ttlMs: 10_000, renewIntervalMs: 2_000, fences: fence });
  const jobs = Object.fromEntries(Array.from({ length: jobCount }, (_, i) => [`j${i}`, { everyMs: 1000, queue: consumer.target }]));
  // Fires handed to the queue in the measured window: where a pipeline falls behind, this tells the
  // producer's side (the scheduler's adds) from the consumer's (the workers).
  let dispatched = 0;
  const logger = (event: FencedEvent) => {
    if (event.type !== 'fire.dispatched') return;
    const now = Date.now() + offset;
    if (now >= meter.from && now <= meter.until) dispatched++;
  };
  const scheduler = createScheduler({ coordinator, jobs, misfire: 'skip', logger });
  const cpu0 = process.cpuUsage();
  const wal0 = await walPosition();
  scheduler.start();
  await coordinator.start();
  await new Promise((resolve) => setTimeout(resolve, WARMUP_MS + seconds * 1000 + 500));
  const cpu = process.cpuUsage(cpu0);
  const walBytes = Number(await walPosition()) - Number(wal0);
  const appliedInRun = meter.appliedInRun;
  await scheduler.stop();
  await coordinator.stop();
  await consumer.stop();
  return { dispatched, applied: meter.applied, lateness: meter.lateness, cpu: (cpu.user + cpu.system) / 1000 / (WARMUP_MS + seconds * 1000 + 500), walBytes, appliedInRun };
}

/**
 * The database's write-ahead log position, in bytes: what the server wrote over a run, whoever wrote
 * it (the queue, the guard, the inserts). Per applied fire, the database's share of a fire's cost.
 */
async function walPosition(): Promise<bigint> {
  const { rows } = await pool.query<{ lsn: string }>(`SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::text AS lsn`);
  return BigInt(rows[0]!.lsn.split('.')[0]!);
}

/** A variant's two runs as one result: rates averaged, lateness over every fire of both. */
function summarize(queue: string, variant: Variant, runs: ReadonlyArray<Awaited<ReturnType<typeof runPipeline>>>) {
  const lateness = runs.flatMap((r) => r.lateness);
  const mean = (f: (r: (typeof runs)[number]) => number) => runs.reduce((sum, r) => sum + f(r), 0) / runs.length;
  return {
    queue,
    variant,
    offered: jobCount,
    dispatchedPerSecond: Math.round(mean((r) => r.dispatched) / seconds),
    appliedPerSecond: Math.round(mean((r) => r.applied) / seconds),
    appliedPerSecondByRun: runs.map((r) => Math.round(r.applied / seconds)),
    latenessMs: { median: Math.round(pct(lateness, 0.5)), p99: Math.round(pct(lateness, 0.99)) },
    processCpu: Math.round(mean((r) => r.cpu) * 100) / 100,
    walBytesPerFire: Math.round(mean((r) => r.walBytes / Math.max(1, r.appliedInRun))),
  };
}

async function main(): Promise<void> {
  await pool.query(`CREATE SCHEMA ${schema}`);
  const results: Array<ReturnType<typeof summarize>> = [];
  try {
    await createGuard({ db: pool, resource: 'setup', schema }).migrate();
    const offset = await serverOffset();
    for (const queue of queues) {
      const variants: readonly Variant[] = queue === 'pg-boss' ? ['unguarded', 'floor', 'guarded', 'guarded-1by1'] : ['unguarded', 'guarded'];
      // Each variant twice a round, in mirrored order (A B C C B A): the database grows and vacuums
      // over a run, and a variant always measured after the others would pay for their leftovers.
      const runs = new Map<Variant, Array<Awaited<ReturnType<typeof runPipeline>>>>(variants.map((v) => [v, []]));
      const order = Array.from({ length: rounds }, () => [...variants, ...[...variants].reverse()]).flat();
      for (const [round, variant] of order.entries()) {
        const run = await runPipeline(queue, variant, round, offset);
        runs.get(variant)!.push(run);
        if (!args.json) process.stderr.write(`${queue} ${variant}: ${Math.round(run.dispatched / seconds)} fires/s dispatched, ${Math.round(run.applied / seconds)} applied\n`);
      }
      for (const variant of variants) results.push(summarize(queue, variant, runs.get(variant)!));
    }
    if (args.json) {
      process.stdout.write(`${JSON.stringify({ jobs: jobCount, seconds, results }, null, 2)}\n`);
      return;
    }
    process.stdout.write(`pipeline benchmark: ${jobCount} jobs each every second (${jobCount} fires/s offered), ${CONCURRENCY} workers, ${seconds} s measured after ${WARMUP_MS / 1000} s, each pipeline twice a round in mirrored order, ${rounds} round${rounds === 1 ? '' : 's'} (applied per run in brackets)\n`);
    for (const r of results) {
      process.stdout.write(
        `  ${r.queue.padEnd(16)} ${r.variant.padEnd(13)} ${String(r.dispatchedPerSecond).padStart(6)} fires/s dispatched ${String(r.appliedPerSecond).padStart(6)} applied [${r.appliedPerSecondByRun.join(', ')}]   lateness median ${String(r.latenessMs.median).padStart(5)} ms, p99 ${String(r.latenessMs.p99).padStart(5)} ms   this process ${r.processCpu} cores   WAL ${r.walBytesPerFire} B/fire\n`,
      );
    }
    for (const queue of queues) {
      const guarded = results.find((r) => r.queue === queue && r.variant === 'guarded')!;
      const bare = results.find((r) => r.queue === queue && r.variant === 'unguarded')!;
      process.stdout.write(`ratio ${queue} guarded over unguarded, fires/s applied: ${(guarded.appliedPerSecond / bare.appliedPerSecond).toFixed(2)}\n`);
      const floor = results.find((r) => r.queue === queue && r.variant === 'floor');
      if (floor !== undefined) {
        process.stdout.write(`ratio ${queue} floor (unguarded + each fire's claim row) over unguarded, fires/s applied: ${(floor.appliedPerSecond / bare.appliedPerSecond).toFixed(2)}\n`);
        process.stdout.write(`ratio ${queue} guarded over its floor, fires/s applied: ${(guarded.appliedPerSecond / floor.appliedPerSecond).toFixed(2)}\n`);
      }
      const oneByOne = results.find((r) => r.queue === queue && r.variant === 'guarded-1by1');
      if (oneByOne !== undefined) process.stdout.write(`ratio ${queue} guarded one job at a time (a savepoint each) over unguarded, fires/s applied: ${(oneByOne.appliedPerSecond / bare.appliedPerSecond).toFixed(2)}\n`);
    }
    if (queues.includes('pg-boss')) {
      const guarded = results.find((r) => r.queue === 'pg-boss' && r.variant === 'guarded')!;
      const bare = results.find((r) => r.queue === 'pg-boss' && r.variant === 'unguarded')!;
      const ratio = guarded.appliedPerSecond / bare.appliedPerSecond;
      process.stdout.write(`target pg-boss guarded >= 0.95 of unguarded at ${jobCount} fires/s offered: ${ratio.toFixed(2)}: ${ratio >= 0.95 ? 'met' : 'not met'}\n`);
    }
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    for (const extra of [...gwSchemas, `${schema}_boss`]) await pool.query(`DROP SCHEMA IF EXISTS ${extra} CASCADE`);
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
    redis.disconnect();
    await pool.end();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:pipeline failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
