import { createCoordinator, createScheduler } from '@fenced/coordinator';
import { createGuard, toProcessor, type HandlerContext } from '@fenced/consumer-guard';
import { createEnvelope, dispatchKey, type Envelope, parseToken } from '@fenced/shared';
import { createRedis, createTestSchema, deleteKeys, spawnTs, testDatabaseUrl, testRedisUrl, uniquePrefix, waitFor, type ChildHandle } from '#test-support';
import { Queue, Worker } from 'bullmq';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let child: ChildHandle | undefined;
const prefix = uniquePrefix('bull');

beforeAll(async () => {
  schema = await createTestSchema('bull');
  await schema.pool.query(`CREATE TABLE ledger (id serial PRIMARY KEY, fire_id text NOT NULL, token bigint NOT NULL, worker text NOT NULL)`);
  await createGuard({ db: schema.pool, resource: 'ledger', schema: schema.name }).migrate();
});
afterAll(async () => {
  child?.kill();
  await schema.drop();
});

describe('the handler wrapper as a BullMQ processor', () => {
  it('a worker paused past its lock, whose job another worker picks up, leaves the effect in the database once', async () => {
    const LOCK_MS = 600;
    const queueName = 'fires';
    const connection = createRedis(undefined, { maxRetriesPerRequest: null });
    const queue = new Queue(queueName, { connection, prefix });
    child = spawnTs('test/fixtures/bullmq-worker.ts', {
      REDIS_URL: testRedisUrl(),
      DATABASE_URL: testDatabaseUrl(),
      SCHEMA: schema.name,
      QUEUE: queueName,
      QUEUE_PREFIX: prefix,
      LOCK_MS: String(LOCK_MS),
    });
    await child.waitForLine((l) => l.kind === 'ready', 20_000);

    const envelope: Envelope = {
      v: 1,
      job: 'ledger',
      fireId: 'ledger@20261129T100000.000Z',
      scheduledAt: '2026-11-29T10:00:00.000Z',
      token: '3',
      issuer: 'node-a',
      payload: {},
    };
    await queue.add('ledger', envelope, { jobId: envelope.fireId });
    await child.waitForLine((l) => l.kind === 'started');
    child.kill('SIGSTOP'); // the worker holds the job and stops renewing its lock

    // A second worker, in this process, finds the stalled job once its lock expired and runs it.
    const guard = createGuard({ db: schema.pool, resource: 'ledger', schema: schema.name });
    const handle = guard.wrapHandler(
      (_payload, ctx: HandlerContext<pg.PoolClient>) =>
        ctx.guardedWrite((client) =>
          client.query(`INSERT INTO ledger (fire_id, token, worker) VALUES ($1, $2, 'parent')`, [ctx.fireId, ctx.token.toString()]),
        ),
      { onStale: 'return' },
    );
    const outcomes: string[] = [];
    const workerConnection = createRedis(undefined, { maxRetriesPerRequest: null });
    const second = new Worker(queueName, async (job) => {
      const status = await toProcessor(handle)(job);
      outcomes.push(status);
      return status;
    }, { connection: workerConnection, prefix, lockDuration: LOCK_MS, stalledInterval: 200 });
    second.on('error', () => {});
    await waitFor(() => outcomes.length === 1, 15_000, 20);
    expect(outcomes).toEqual(['applied']);

    child.kill('SIGCONT'); // the first worker wakes up and finishes its handler
    const late = await child.waitForLine((l) => l.kind === 'outcome', 10_000);
    expect(late.status).toBe('duplicate');

    const { rows } = await schema.pool.query(`SELECT fire_id, worker FROM ledger`);
    expect(rows).toEqual([{ fire_id: envelope.fireId, worker: 'parent' }]);

    await second.close();
    await queue.close();
    await deleteKeys(connection, prefix);
    connection.disconnect();
    workerConnection.disconnect();
  });

  it("a deposed term's copy of a fire that reaches the queue first does not cost the fire", async () => {
    const queueName = 'fires-terms';
    const connection = createRedis(undefined, { maxRetriesPerRequest: null });
    const queue = new Queue(queueName, { connection, prefix });
    const guard = createGuard({ db: schema.pool, resource: 'terms', schema: schema.name });
    const at = (token: bigint): Envelope => createEnvelope({ job: 'terms', scheduledAt: Date.UTC(2026, 10, 29, 11), token: parseToken(token), issuer: 'node-a', payload: {} });
    // The deposed leader (token 5) enqueues the fire; the new leader is elected (fence at 6) and
    // catches the same fire up. Both copies are queued: the job id is the dispatch key.
    const old = at(5n);
    await queue.add('terms', old, { jobId: dispatchKey(old) });
    await guard.advance(6n);
    const caughtUp = at(6n);
    await queue.add('terms', caughtUp, { jobId: dispatchKey(caughtUp) });

    const handle = guard.wrapHandler(
      (_payload, ctx: HandlerContext<pg.PoolClient>) =>
        ctx.guardedWrite((client) => client.query(`INSERT INTO ledger (fire_id, token, worker) VALUES ($1, $2, 'terms')`, [ctx.fireId, ctx.token.toString()])),
      { onStale: 'return' },
    );
    const outcomes: string[] = [];
    const workerConnection = createRedis(undefined, { maxRetriesPerRequest: null });
    const worker = new Worker(queueName, async (job) => {
      const status = await toProcessor(handle)(job);
      outcomes.push(status);
      return status;
    }, { connection: workerConnection, prefix });
    worker.on('error', () => {});
    await waitFor(() => outcomes.length === 2, 15_000, 20);
    expect(outcomes.sort()).toEqual(['applied', 'stale']);
    const { rows } = await schema.pool.query(`SELECT fire_id, token FROM ledger WHERE worker = 'terms'`);
    expect(rows).toEqual([{ fire_id: old.fireId, token: '6' }]);

    await worker.close();
    await queue.close();
    await deleteKeys(connection, prefix);
    connection.disconnect();
    workerConnection.disconnect();
  });
});

/**
 * Two replicas of a scheduler whose one job's fires go to a BullMQ queue, the coordinator given the
 * guard of the job's resource (as the coordinator's README says), and a worker to start and stop.
 */
function handoverRig(name: string) {
  const queueName = `fires-${name}`;
  const resource = name;
  const connection = createRedis(undefined, { maxRetriesPerRequest: null });
  const queue = new Queue(queueName, { connection, prefix });
  const guard = createGuard({ db: schema.pool, resource, schema: schema.name });
  const leasePrefix = uniquePrefix(name);
  const replica = () => {
    const coordinator = createCoordinator({ redis: connection, lease: name, keyPrefix: leasePrefix, ttlMs: 2000, renewIntervalMs: 500, fences: [guard] });
    const scheduler = createScheduler({ coordinator, jobs: { [resource]: { everyMs: 100, queue } }, misfire: 'all' });
    return { coordinator, scheduler };
  };
  const queued = async () => (await queue.getJobs(['waiting', 'delayed', 'active', 'completed'])).map((job) => job.data as Envelope);
  const handle = guard.wrapHandler(
    (_payload, ctx: HandlerContext<pg.PoolClient>) =>
      ctx.guardedWrite((client) => client.query(`INSERT INTO ledger (fire_id, token, worker) VALUES ($1, $2, $3)`, [ctx.fireId, ctx.token.toString(), name])),
    { onStale: 'return' },
  );
  const workerConnection = createRedis(undefined, { maxRetriesPerRequest: null });
  const startWorker = () => new Worker(queueName, toProcessor(handle), { connection: workerConnection, prefix }).on('error', () => {});
  const applied = async () => (await schema.pool.query<{ fire_id: string }>(`SELECT fire_id FROM ledger WHERE worker = $1`, [name])).rows.map((r) => r.fire_id);
  const close = async () => {
    workerConnection.disconnect();
    await queue.obliterate({ force: true });
    await queue.close();
    await deleteKeys(connection, prefix);
    await deleteKeys(connection, leasePrefix);
    connection.disconnect();
  };
  /**
   * The next leader is elected (the fence advanced past the first term's token) and only then do
   * workers run: every fire of `fireIds` takes effect (the first term's copies are refused as stale,
   * so each must have been dispatched again), none twice.
   */
  const handOverThenApply = async (fireIds: readonly string[]) => {
    const b = replica();
    b.scheduler.start();
    await b.coordinator.start();
    await waitFor(() => b.coordinator.isLeader(), 10_000);
    const worker = startWorker();
    await waitFor(async () => {
      const ids = new Set(await applied());
      return fireIds.every((id) => ids.has(id));
    }, 20_000);
    await b.scheduler.stop();
    await b.coordinator.stop();
    await worker.close();
    const ids = await applied();
    expect(new Set(ids).size, 'a fire applied twice').toBe(ids.length);
  };
  /** The first term: a leader that queues fires while `during` runs, then steps down (a deploy, say). */
  const firstTerm = async (during: () => Promise<void>, beforeStepDown: () => Promise<void> = async () => undefined) => {
    const a = replica();
    a.scheduler.start();
    await a.coordinator.start();
    await during();
    await a.scheduler.stop();
    await beforeStepDown();
    await a.coordinator.stop();
  };
  return { replica, queued, handle, startWorker, applied, firstTerm, handOverThenApply, close };
}

describe('queued fires across a change of leader', () => {
  it('fires the last term queued but no worker applied before the election are dispatched again, and each applies once', async () => {
    const rig = handoverRig('handover');
    // The first leader's fires are applied by a worker for a while; then the workers fall behind
    // (stopped here) and fires pile up in the queue.
    await rig.firstTerm(async () => {
      const worker = rig.startWorker();
      await waitFor(async () => (await rig.applied()).length >= 2, 10_000);
      await worker.close();
      const appliedByA = (await rig.applied()).length;
      await waitFor(async () => (await rig.queued()).length >= appliedByA + 4, 10_000);
    });
    await rig.handOverThenApply((await rig.queued()).map((e) => e.fireId));
    await rig.close();
  });

  it('fires the last term queued that no worker ever applied are dispatched again, and each applies once', async () => {
    const rig = handoverRig('unapplied');
    // The workers are down for the whole first term: nothing the first leader queues takes effect.
    await rig.firstTerm(() => waitFor(async () => (await rig.queued()).length >= 4, 10_000));
    expect(await rig.applied()).toEqual([]);
    await rig.handOverThenApply((await rig.queued()).map((e) => e.fireId));
    await rig.close();
  });

  it('an earlier queued fire still waiting when a later one was applied is dispatched again', async () => {
    const rig = handoverRig('out-of-order');
    // A worker takes the newest fire first (queues do not promise order) while the first term leads.
    let newest = '';
    await rig.firstTerm(
      () => waitFor(async () => (await rig.queued()).length >= 4, 10_000),
      async () => {
        const copies = (await rig.queued()).sort((x, y) => Date.parse(x.scheduledAt) - Date.parse(y.scheduledAt));
        await rig.handle(copies[copies.length - 1]!);
        newest = copies[copies.length - 1]!.fireId;
      },
    );
    expect(await rig.applied()).toEqual([newest]);
    await rig.handOverThenApply((await rig.queued()).map((e) => e.fireId));
    await rig.close();
  });
});
