/**
 * fenced on pg-boss, with the real library on the local PostgreSQL: the transactional handler (the
 * fire's write and the job's completion in pg-boss's one transaction) and the scheduler's dispatch
 * target.
 */
import { createCoordinator, createScheduler, dispatchKey, pgBossQueue } from '@fenced/coordinator';
import { createGuard, toPgBossHandler, type Guard } from '@fenced/consumer-guard';
import { createEnvelope, type Envelope, parseToken } from '@fenced/shared';
import { createRedis, createTestSchema, deleteKeys, spawnTs, testDatabaseUrl, uniquePrefix, uniqueSchemaName, waitFor, type ChildHandle } from '#test-support';
import { PgBoss } from 'pg-boss';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let guard: Guard<pg.PoolClient>;
const bossSchema = uniqueSchemaName('boss');
const bosses: PgBoss[] = [];
let child: ChildHandle | undefined;

beforeAll(async () => {
  schema = await createTestSchema('boss');
  await schema.pool.query(`CREATE TABLE ledger (id serial PRIMARY KEY, fire_id text NOT NULL, token bigint NOT NULL, worker text NOT NULL)`);
  guard = createGuard({ db: schema.pool, resource: 'ledger', schema: schema.name });
  await guard.migrate();
});
afterEach(async () => {
  child?.kill('SIGKILL');
  child = undefined;
  await Promise.all(bosses.splice(0).map((boss) => boss.stop({ graceful: false }).catch(() => {})));
  await schema.pool.query('TRUNCATE ledger, fenced_fences, fenced_fences_applied');
});
afterAll(async () => {
  await schema.pool.query(`DROP SCHEMA IF EXISTS "${bossSchema}" CASCADE`);
  await schema.drop();
});

async function startBoss(options: Partial<ConstructorParameters<typeof PgBoss>[0] & object> = {}): Promise<PgBoss> {
  const boss = new PgBoss({ connectionString: testDatabaseUrl(), schema: bossSchema, schedule: false, ...options });
  boss.on('error', () => {});
  await boss.start();
  bosses.push(boss);
  return boss;
}

const ledgerRows = async () => (await schema.pool.query<{ fire_id: string; token: string; worker: string }>(`SELECT fire_id, token, worker FROM ledger ORDER BY id`)).rows;

/** The handler's statuses are known before pg-boss commits: wait for the commit (every job completed). */
const allCompleted = (boss: PgBoss, queue: string) => waitFor(async () => (await boss.findJobs(queue)).every((job) => job.state === 'completed'), 20_000);

const envelopeOf = (token: bigint): Envelope => createEnvelope({ job: 'ledger', scheduledAt: Date.UTC(2026, 10, 29, 10), token: parseToken(token), issuer: 'node-a', payload: {} });

/** The parent's own transactional worker: writes a ledger row per fire, records each status. */
async function parentWorker(boss: PgBoss, queue: string, statuses: string[]): Promise<void> {
  const handle = guard.wrapTransactionalHandler((_payload, ctx) =>
    ctx.guardedWrite((tx) => tx.executeSql(`INSERT INTO "${schema.name}".ledger (fire_id, token, worker) VALUES ($1, $2, 'parent')`, [ctx.fireId, ctx.token.toString()])),
  );
  const process_ = toPgBossHandler(handle);
  await boss.work(queue, { transactional: true, pollingIntervalSeconds: 0.5 }, async (jobs, tx) => {
    const result = await process_(jobs, tx);
    statuses.push(...result);
    return result;
  });
}

describe('the transactional pg-boss handler', () => {
  it('a worker paused past its job expiry, whose job another worker then completes, commits nothing when it wakes', async () => {
    const queue = 'fires-pause';
    // Expiry runs in the supervisor's pass, which needs both timers due.
    const boss = await startBoss({ superviseIntervalSeconds: 1, monitorIntervalSeconds: 1 });
    await boss.createQueue(queue, { expireInSeconds: 1, retryLimit: 5, retryDelay: 0 });
    child = spawnTs('test/fixtures/pg-boss-worker.ts', { DATABASE_URL: testDatabaseUrl(), SCHEMA: schema.name, BOSS_SCHEMA: bossSchema, QUEUE: queue });
    await child.waitForLine((l) => l.kind === 'ready', 20_000);

    const envelope = envelopeOf(3n);
    await pgBossQueue(boss).add(queue, envelope, { jobId: dispatchKey(envelope) });
    await child.waitForLine((l) => l.kind === 'started', 20_000);
    child.kill('SIGSTOP'); // the worker holds the job, its transaction open, and stops

    // pg-boss expires the job (1 s) and a second worker, in this process, runs it to completion.
    const statuses: string[] = [];
    await parentWorker(boss, queue, statuses);
    await waitFor(() => statuses.length >= 1, 30_000, 20);
    // A status is known before pg-boss commits: an attempt whose completion pg-boss then refused (the
    // job expired under it too) is rolled back and run again, so only the first status is certain.
    expect(statuses[0]).toBe('applied');
    await allCompleted(boss, queue);

    child.kill('SIGCONT'); // the first worker wakes up inside its transaction and writes
    const late = await child.waitForLine((l) => l.kind === 'outcome', 20_000);
    // Its batch was checked and its fire claimed before the handler started, in the transaction it
    // still holds: pg-boss has ended that transaction by now (its idle-in-transaction timeout, or its
    // own timer for the expired job, fired on waking too, aborting the job's signal), so the worker's
    // write is refused (GUARD_UNAVAILABLE) or fails with the connection. Either way nothing of it is
    // left in the database, and the parent's run of the fire stands.
    const refused =
      late.status === 'duplicate' || (late.status === 'error' && (late.code === 'GUARD_UNAVAILABLE' || /terminating connection|Connection terminated/.test(String(late.message))));
    expect(refused, JSON.stringify(late)).toBe(true);
    expect(await ledgerRows(), JSON.stringify(await ledgerRows())).toEqual([{ fire_id: envelope.fireId, token: "3", worker: "parent" }]);
  });

  it('a refused fire (stale) completes the job and writes nothing; an accepted one commits with the completion', async () => {
    const queue = 'fires-stale';
    const boss = await startBoss();
    await boss.createQueue(queue);
    await guard.advance(8n);
    const stale = envelopeOf(7n);
    const fresh = { ...envelopeOf(8n), fireId: 'ledger@20261129T100001.000Z', scheduledAt: '2026-11-29T10:00:01.000Z' };
    const ids = [await boss.send(queue, stale), await boss.send(queue, fresh)];
    const statuses: string[] = [];
    await parentWorker(boss, queue, statuses);
    await waitFor(() => statuses.length >= 2, 20_000, 20);
    await allCompleted(boss, queue);
    expect(statuses.sort()).toEqual(['applied', 'stale']);
    for (const id of ids) expect((await boss.findJobs(queue, { id: id! }))[0]?.state).toBe('completed');
    expect(await ledgerRows()).toEqual([{ fire_id: fresh.fireId, token: '8', worker: 'parent' }]);
  });

  it('a write that fails rolls back the job with it: pg-boss retries it, and the retry applies', async () => {
    const queue = 'fires-retry';
    const boss = await startBoss();
    await boss.createQueue(queue, { retryLimit: 3, retryDelay: 0 });
    let failures = 1;
    const handle = guard.wrapTransactionalHandler((_payload, ctx) =>
      ctx.guardedWrite(async (tx) => {
        await tx.executeSql(`INSERT INTO "${schema.name}".ledger (fire_id, token, worker) VALUES ($1, $2, 'parent')`, [ctx.fireId, ctx.token.toString()]);
        if (failures-- > 0) throw new Error('the write failed after its insert');
      }),
    );
    const statuses: string[] = [];
    const process_ = toPgBossHandler(handle);
    await boss.work(queue, { transactional: true, pollingIntervalSeconds: 0.5 }, async (jobs, tx) => {
      const result = await process_(jobs, tx);
      statuses.push(...result);
      return result;
    });
    const envelope = envelopeOf(4n);
    const id = await boss.send(queue, envelope);
    await waitFor(() => statuses.length >= 1, 20_000, 20);
    await allCompleted(boss, queue);
    expect(statuses).toEqual(['applied']);
    expect((await boss.findJobs(queue, { id: id! }))[0]?.retryCount).toBe(1);
    expect(await ledgerRows()).toEqual([{ fire_id: envelope.fireId, token: '4', worker: 'parent' }]);
  });
});

describe('the pg-boss dispatch target', () => {
  it('the scheduler sends each fire once per term: the same dispatch again is dropped by pg-boss', async () => {
    const queue = 'ledger';
    const boss = await startBoss();
    await boss.createQueue(queue);
    const redis = createRedis();
    const prefix = uniquePrefix('boss');
    const coordinator = createCoordinator({ redis, lease: 'boss', keyPrefix: prefix, ttlMs: 2000, renewIntervalMs: 500 });
    const target = pgBossQueue(boss);
    const scheduler = createScheduler({ coordinator, jobs: { ledger: { everyMs: 100, queue: target } }, misfire: 'skip' });
    scheduler.start();
    await coordinator.start();
    const sent = async () => (await boss.findJobs(queue)).map((job) => job.data as Envelope);
    await waitFor(async () => (await sent()).length >= 3, 10_000);
    await scheduler.stop();
    await coordinator.stop();
    const jobs = await sent();
    const first = jobs[0]!;
    expect(new Set(jobs.map((e) => e.fireId)).size).toBe(jobs.length);

    // A second dispatch of the same fire by the same term (a retried enqueue) is dropped.
    await target.add(queue, first, { jobId: dispatchKey(first) });
    expect((await sent()).length).toBe(jobs.length);
    await deleteKeys(redis, prefix);
    redis.disconnect();
  });

  it('a deposed term\'s copy of a fire that reaches the queue first does not cost the fire', async () => {
    const queue = 'fires-terms';
    const boss = await startBoss();
    await boss.createQueue(queue);
    const target = pgBossQueue(boss);
    // The deposed leader (token 5) enqueues the fire; the new leader is elected (fence at 6) and
    // catches the same fire up.
    const old = envelopeOf(5n);
    await target.add(queue, old, { jobId: dispatchKey(old) });
    await guard.advance(6n);
    const caughtUp = envelopeOf(6n);
    await target.add(queue, caughtUp, { jobId: dispatchKey(caughtUp) });

    const statuses: string[] = [];
    await parentWorker(boss, queue, statuses);
    await waitFor(() => statuses.length >= 2, 20_000, 20);
    await allCompleted(boss, queue);
    expect(statuses.sort()).toEqual(['applied', 'stale']);
    expect(await ledgerRows()).toEqual([{ fire_id: old.fireId, token: '6', worker: 'parent' }]);
  });
});
