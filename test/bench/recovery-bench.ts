/**
 * Part of pnpm bench:coordinator: the time from a leader's start to its first dispatch after Redis
 * lost its records (a restart without persistence), with many jobs and the guard attached.
 *
 * The guard's table of applied fires says where each job stands. The scheduler asks it once for
 * every job (`Fence.lastAppliedFires`); before, it asked one question per job, one after another,
 * which is measured here too, side by side, with the same data.
 *
 * Private redis-server on a free loopback port; PostgreSQL from DATABASE_URL or the loopback default
 * (its own schema, dropped at the end). Flags: --jobs N (default 10000), --json.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
import { resolvePostgres, startRedisServer } from '@fenced/chaos';
import { createGuard } from '@fenced/consumer-guard';
import { createCoordinator, createScheduler, fireId, parseFireId } from '@fenced/coordinator';

const { values: args } = parseArgs({ options: { jobs: { type: 'string', default: '10000' }, json: { type: 'boolean', default: false } } });
const jobCount = Number(args.jobs);
if (!(jobCount >= 1)) {
  process.stderr.write('usage: recovery-bench [--jobs N] [--json]\n');
  process.exit(2);
}
const EVERY_MS = 1000;
const schemaName = `bench_recovery_${randomBytes(4).toString('hex')}`;
const postgres = await resolvePostgres();
const admin = new pg.Pool({ connectionString: postgres.url, max: 2 });
await admin.query(`CREATE SCHEMA "${schemaName}"`);
const pool = new pg.Pool({ connectionString: postgres.url, max: 10 });
pool.on('error', () => {});
const server = await startRedisServer();
const results: Record<string, unknown> = { jobs: jobCount };
const lines: string[] = [];

try {
  const resource = 'ledger';
  const guard = createGuard({ db: pool, resource, schema: schemaName });
  await guard.migrate();
  await guard.advance(100n);
  // Every job applied its fires up to three intervals ago: after the loss, each owes a few fires.
  const lastApplied = Math.floor(Date.now() / EVERY_MS) * EVERY_MS - 3 * EVERY_MS;
  const ids: string[] = [];
  for (let i = 0; i < jobCount; i++) for (let k = 0; k < 3; k++) ids.push(fireId(`job-${i}`, lastApplied - k * EVERY_MS));
  await pool.query(`INSERT INTO "${schemaName}".fenced_fences_applied (resource, fire_id, token) SELECT $1, unnest($2::text[]), 100`, [resource, ids]);

  /** One per-job question, as the scheduler asked before the batch: the job's latest applied fire. */
  const perJob = async (jobs: readonly string[]) => {
    const latest = new Map<string, number>();
    for (const job of jobs) {
      const { rows } = await pool.query(
        `SELECT max(fire_id COLLATE "C") AS fire_id FROM "${schemaName}".fenced_fences_applied WHERE resource = $1 AND fire_id LIKE $2`,
        [resource, `${job}@%`],
      );
      const at = rows[0]?.fire_id ? parseFireId(rows[0].fire_id as string)?.scheduledAt : undefined;
      if (at !== undefined) latest.set(job, at);
    }
    return latest;
  };

  for (const variant of ['batched', 'one query per job'] as const) {
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
    redis.on('error', () => {});
    await redis.flushall(); // Redis restarted without persistence: no lease, no counter, no record
    const coordinator = createCoordinator({ redis, lease: 'recovery', ttlMs: 5000, renewIntervalMs: 1000, fences: [guard] });
    let first: number | undefined;
    const jobs = Object.fromEntries(
      Array.from({ length: jobCount }, (_, i) => [
        `job-${i}`,
        {
          everyMs: EVERY_MS,
          handler: () => void (first ??= performance.now()),
        },
      ]),
    );
    const scheduler = createScheduler({ coordinator, jobs, concurrency: 1024, ...(variant === 'batched' ? {} : { recoverLastFired: perJob }) });
    scheduler.start();
    const started = performance.now();
    await coordinator.start();
    while (first === undefined && performance.now() - started < 120_000) await new Promise((r) => setTimeout(r, 5));
    const ms = first === undefined ? NaN : first - started;
    await scheduler.stop();
    await coordinator.stop();
    redis.disconnect();
    results[variant === 'batched' ? 'first_dispatch_ms_batched' : 'first_dispatch_ms_per_job'] = Math.round(ms);
    lines.push(`recovery after Redis lost its records, ${jobCount} jobs, time to first dispatch: ${Math.round(ms)} ms (${variant === 'batched' ? 'one query for all jobs' : `${jobCount} queries, one after another, as before`})`);
    if (!args.json) process.stderr.write(`${lines[lines.length - 1]}\n`);
  }
} finally {
  await server.stop();
  await pool.end();
  await admin.query(`DROP SCHEMA "${schemaName}" CASCADE`);
  await admin.end();
  await postgres.stop();
}
if (args.json) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
else process.stdout.write(`${lines.join('\n')}\n`);
