/**
 * fenced on graphile-worker, with the real library on the local PostgreSQL: the task wrapper and the
 * scheduler's dispatch target.
 */
import { createCoordinator, createScheduler, dispatchKey, graphileWorkerQueue } from '@fenced/coordinator';
import { createGuard, toGraphileTask, type Guard } from '@fenced/consumer-guard';
import { createEnvelope, type Envelope, parseToken } from '@fenced/shared';
import { createRedis, createTestDatabase, createTestSchema, deleteKeys, spawnTs, uniquePrefix, uniqueSchemaName, waitFor, type ChildHandle } from '#test-support';
import { Logger, makeWorkerUtils, run, type Runner, type WorkerUtils } from 'graphile-worker';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

// A database of its own: graphile-worker's workers stop when any graphile-worker schema in their
// database is migrated (its `worker:migrate` notification is database-wide), and other test files
// (the queue examples) migrate theirs meanwhile.
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let schema: Awaited<ReturnType<typeof createTestSchema>>;
let guard: Guard<pg.PoolClient>;
let utils: WorkerUtils;
const gwSchema = uniqueSchemaName('gw');
const silent = new Logger(() => () => {});
const runners: Runner[] = [];
let child: ChildHandle | undefined;

beforeAll(async () => {
  database = await createTestDatabase('gw');
  schema = await createTestSchema('gw', database.url);
  await schema.pool.query(`CREATE TABLE ledger (id serial PRIMARY KEY, fire_id text NOT NULL, token bigint NOT NULL, worker text NOT NULL)`);
  guard = createGuard({ db: schema.pool, resource: 'ledger', schema: schema.name });
  await guard.migrate();
  utils = await makeWorkerUtils({ connectionString: database.url, schema: gwSchema, logger: silent });
  await utils.migrate();
});
afterEach(async () => {
  child?.kill('SIGKILL');
  child = undefined;
  await Promise.all(runners.splice(0).map((runner) => runner.stop().catch(() => {})));
  await schema.pool.query(`TRUNCATE ledger, fenced_fences, fenced_fences_applied; DELETE FROM "${gwSchema}"._private_jobs`);
});
afterAll(async () => {
  await utils.release();
  await schema.pool.query(`DROP SCHEMA IF EXISTS "${gwSchema}" CASCADE`);
  await schema.drop();
  await database.drop();
});

const ledgerRows = async () => (await schema.pool.query<{ fire_id: string; token: string; worker: string }>(`SELECT fire_id, token, worker FROM ledger ORDER BY id`)).rows;
const queuedJobs = async () => (await schema.pool.query<{ key: string | null; payload: Envelope }>(`SELECT key, payload FROM "${gwSchema}"._private_jobs ORDER BY id`)).rows;
const envelopeOf = (token: bigint): Envelope => createEnvelope({ job: 'ledger', scheduledAt: Date.UTC(2026, 10, 29, 10), token: parseToken(token), issuer: 'node-a', payload: {} });

/** A runner in this process with the wrapped handler writing as 'parent'; records each status. */
async function parentRunner(statuses: string[]): Promise<void> {
  const handle = guard.wrapHandler(
    (_payload, ctx) => ctx.guardedWrite((client) => client.query(`INSERT INTO ledger (fire_id, token, worker) VALUES ($1, $2, 'parent')`, [ctx.fireId, ctx.token.toString()])),
    { onStale: 'return' },
  );
  const task = toGraphileTask(async (envelope, call) => {
    const outcome = await handle(envelope, call);
    statuses.push(outcome.status);
    return outcome;
  });
  runners.push(await run({ connectionString: database.url, schema: gwSchema, concurrency: 1, noHandleSignals: true, pollInterval: 100, logger: silent, taskList: { ledger: task } }));
}

describe('the graphile-worker task wrapper', () => {
  it('a worker paused mid-job, whose job is unlocked and run by another worker, leaves the effect in the database once', async () => {
    child = spawnTs('test/fixtures/graphile-worker.ts', { DATABASE_URL: database.url, SCHEMA: schema.name, GW_SCHEMA: gwSchema });
    await child.waitForLine((l) => l.kind === 'ready', 20_000);
    const envelope = envelopeOf(3n);
    await graphileWorkerQueue(utils).add('ledger', envelope, { jobId: dispatchKey(envelope) });
    const locked = await child.waitForLine((l) => l.kind === 'locked', 20_000);
    await child.waitForLine((l) => l.kind === 'started', 20_000);
    child.kill('SIGSTOP'); // the worker holds the job and stops

    // graphile-worker keeps a crashed worker's lock for 4 hours; what frees the job sooner is an
    // operator or a supervisor declaring the worker dead. Here the worker is only paused.
    await utils.forceUnlockWorkers([locked.workerId as string]);
    const statuses: string[] = [];
    await parentRunner(statuses);
    await waitFor(() => statuses.length >= 1, 20_000, 20);
    expect(statuses).toEqual(['applied']);

    child.kill('SIGCONT'); // the first worker wakes up and finishes its handler
    const late = await child.waitForLine((l) => l.kind === 'outcome', 20_000);
    expect(late.status).toBe('duplicate');
    expect(await ledgerRows()).toEqual([{ fire_id: envelope.fireId, token: '3', worker: 'parent' }]);
  });

  it('stale and duplicate fires complete the job: nothing is left to retry', async () => {
    await guard.advance(8n);
    const stale = envelopeOf(7n);
    const fresh = envelopeOf(8n);
    for (const envelope of [stale, fresh, fresh]) await utils.addJob('ledger', envelope, { maxAttempts: 3 });
    const statuses: string[] = [];
    await parentRunner(statuses);
    await waitFor(() => statuses.length >= 3, 20_000, 20);
    await waitFor(async () => (await queuedJobs()).length === 0, 10_000);
    expect(statuses.sort()).toEqual(['applied', 'duplicate', 'stale']);
    expect(await ledgerRows()).toEqual([{ fire_id: fresh.fireId, token: '8', worker: 'parent' }]);
  });
});

describe('the graphile-worker dispatch target', () => {
  it('the scheduler adds each fire once per term: the same dispatch again is dropped by its job key', async () => {
    const redis = createRedis();
    const prefix = uniquePrefix('gw');
    const coordinator = createCoordinator({ redis, lease: 'gw', keyPrefix: prefix, ttlMs: 2000, renewIntervalMs: 500 });
    const target = graphileWorkerQueue(utils);
    const scheduler = createScheduler({ coordinator, jobs: { ledger: { everyMs: 100, queue: target } }, misfire: 'skip' });
    scheduler.start();
    await coordinator.start();
    await waitFor(async () => (await queuedJobs()).length >= 3, 10_000);
    await scheduler.stop();
    await coordinator.stop();
    const jobs = await queuedJobs();
    for (const job of jobs) expect(job.key).toBe(dispatchKey(job.payload));

    // A second dispatch of the same fire by the same term (a retried enqueue) is dropped.
    await target.add('ledger', jobs[0]!.payload, { jobId: jobs[0]!.key! });
    expect((await queuedJobs()).length).toBe(jobs.length);
    await deleteKeys(redis, prefix);
    redis.disconnect();
  });

  it("a deposed term's copy of a fire that reaches the queue first does not cost the fire", async () => {
    const target = graphileWorkerQueue(utils);
    const old = envelopeOf(5n);
    await target.add('ledger', old, { jobId: dispatchKey(old) });
    await guard.advance(6n); // the new leader is elected and catches the same fire up
    const caughtUp = envelopeOf(6n);
    await target.add('ledger', caughtUp, { jobId: dispatchKey(caughtUp) });

    const statuses: string[] = [];
    await parentRunner(statuses);
    await waitFor(() => statuses.length >= 2, 20_000, 20);
    expect(statuses.sort()).toEqual(['applied', 'stale']);
    expect(await ledgerRows()).toEqual([{ fire_id: old.fireId, token: '6', worker: 'parent' }]);
  });
});
