import { createGuard } from '@fenced/consumer-guard';
import { createCoordinator, createScheduler, fireId, type Coordinator, type Scheduler } from '@fenced/coordinator';
import type { Envelope, Fence } from '@fenced/shared';
import { createRedis, createTestSchema, deleteKeys, uniquePrefix, waitFor } from '#test-support';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let admin: Redis;
const stoppers: Array<() => Promise<unknown> | unknown> = [];

beforeAll(async () => {
  schema = await createTestSchema('recover');
  admin = createRedis();
  await createGuard({ db: schema.pool, resource: 'setup', schema: schema.name }).migrate();
  await schema.pool.query(`CREATE TABLE effects (fire_id text PRIMARY KEY, token bigint NOT NULL)`);
});
afterAll(async () => {
  admin.disconnect();
  await schema.drop();
});
afterEach(async () => {
  for (const stop of stoppers.splice(0).reverse()) await stop();
});

describe('the guard remembers which fires took effect', () => {
  it('answers, per job and in one query, the latest fire applied since a time', async () => {
    const guard = createGuard({ db: schema.pool, resource: `applied-${uniquePrefix()}`, schema: schema.name });
    const write = (id: string) => guard.guardedWrite(1n, async () => undefined, { fireId: id });
    const at = (iso: string) => Date.parse(iso);
    // Applied out of order, a custom (non-scheduler) fire id, and a job name that prefixes another.
    for (const id of [
      fireId('invoices', at('2026-11-30T10:02:00Z')),
      fireId('invoices', at('2026-11-30T10:01:00Z')),
      fireId('invoices-eu', at('2026-11-30T09:00:00Z')),
      fireId('refresh', at('2026-11-30T10:00:30Z')),
      'hand-made-id',
    ]) {
      await write(id);
    }
    // Another resource's fires are not this resource's.
    await guard.guardedWrite(1n, async () => undefined, { fireId: fireId('invoices', at('2026-12-01T00:00:00Z')), resource: 'other' });

    const latest = await guard.lastAppliedFires(new Date(Date.now() - 60_000));
    expect(Object.fromEntries(latest)).toEqual({
      invoices: at('2026-11-30T10:02:00Z'),
      'invoices-eu': at('2026-11-30T09:00:00Z'),
      refresh: at('2026-11-30T10:00:30Z'),
    });
    // Applied before `since`: not looked at.
    expect((await guard.lastAppliedFires(new Date(Date.now() + 60_000))).size).toBe(0);
  });
});

describe('a scheduler whose Redis lost its records', () => {
  it('resumes from the fires its guard applied, without a hook, asking once for every job', async () => {
    const prefix = uniquePrefix('recover');
    stoppers.push(() => deleteKeys(admin, prefix));
    const resource = `ledger-${prefix}`;
    const guard = createGuard({ db: schema.pool, resource, schema: schema.name });
    // The coordinator's fence, counting how often the scheduler asks it for applied fires.
    let asked = 0;
    const fence: Fence = {
      resource: guard.resource,
      highest: () => guard.highest(),
      advance: (token) => guard.advance(token),
      lastAppliedFires: (since) => (asked++, guard.lastAppliedFires(since)),
    };
    const handle = guard.wrapHandler(async (_payload, ctx) =>
      ctx.guardedWrite((client: pg.PoolClient) => client.query(`INSERT INTO effects (fire_id, token) VALUES ($1, $2)`, [ctx.fireId, ctx.token.toString()])),
    );
    const dispatched: Envelope[] = [];
    const outcomes: string[] = [];
    const handler = async (envelope: Envelope) => {
      dispatched.push(envelope);
      outcomes.push((await handle(envelope)).status);
    };
    const redis = createRedis();
    stoppers.push(() => redis.disconnect());
    const coordinator: Coordinator = createCoordinator({ redis, lease: 'recover', keyPrefix: prefix, ttlMs: 500, renewIntervalMs: 100, acquireRetryMs: 50, fences: [fence] });
    // Ten jobs, a one-hour catch-up window: without the applied fires, each job would be owed every
    // fire of the last hour (up to maxCatchUpFires) after the loss.
    const jobs = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`job-${i}`, { everyMs: 100, handler }]));
    const scheduler: Scheduler = createScheduler({ coordinator, jobs, tickMs: 5, maxCatchUpFires: 1000 });
    stoppers.push(() => coordinator.stop());
    stoppers.push(() => scheduler.stop());
    scheduler.start();
    await coordinator.start();
    await waitFor(() => outcomes.filter((o) => o === 'applied').length >= 30, 20_000);
    const firstFire = Math.min(...dispatched.map((e) => Date.parse(e.scheduledAt)));
    const askedBefore = asked;

    // Redis loses everything (a restart without persistence): lease, counter and the fires record.
    const before = dispatched.length;
    const firstToken = coordinator.token()!;
    await deleteKeys(admin, prefix);
    await waitFor(() => coordinator.isLeader() && coordinator.token()! > firstToken, 20_000);
    await waitFor(() => dispatched.length >= before + 30, 20_000);

    const after = dispatched.slice(before);
    // Nothing from before the job ever ran was dispatched: the scheduler knew where each job stood.
    expect(after.filter((e) => Date.parse(e.scheduledAt) < firstFire).map((e) => e.fireId)).toEqual([]);
    // At most the fire in flight at the loss, per job, is dispatched again (and dropped by the dedupe).
    expect(outcomes.slice(before).filter((o) => o === 'duplicate').length).toBeLessThanOrEqual(10);
    // One question per election for all ten jobs, not one per job.
    expect(asked - askedBefore).toBeGreaterThanOrEqual(1);
    expect(asked - askedBefore).toBeLessThanOrEqual(3);
    expect(askedBefore).toBeLessThanOrEqual(1);
  });
});
