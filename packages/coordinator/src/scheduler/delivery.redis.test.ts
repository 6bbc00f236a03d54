// The scheduler owns at-least-once: a fire whose handler fails is dispatched again until it is
// settled (applied, a duplicate, given up) or refused as stale, or its term ends, and then the next
// term dispatches it. Each test fails on a scheduler that counts a throwing handler as dispatched.
import { FireGivenUpError, parseFireId, parseToken, StaleTokenError, type Envelope, type FencedEvent } from '@fenced/shared';
import { createRedis, deleteKeys, uniquePrefix, waitFor } from '#test-support';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createCoordinator, createScheduler, type Coordinator, type CreateSchedulerOptions, type Scheduler, type SchedulerEventMap } from '../index.js';

let admin: Redis;
let prefix: string;
const stoppers: Array<() => Promise<void> | void> = [];

beforeAll(() => {
  admin = createRedis();
});
afterAll(() => admin.disconnect());
afterEach(async () => {
  for (const stop of stoppers.splice(0).reverse()) await stop();
  await deleteKeys(admin, prefix);
});

interface Replica {
  coordinator: Coordinator;
  scheduler: Scheduler;
}

function replica(jobs: CreateSchedulerOptions['jobs'], extra: Partial<CreateSchedulerOptions> = {}): Replica {
  const redis = createRedis();
  const coordinator = createCoordinator({ redis, lease: 'delivery', keyPrefix: prefix, ttlMs: 600, renewIntervalMs: 100, acquireRetryMs: 50 });
  const scheduler = createScheduler({ coordinator, jobs, tickMs: 10, ...extra });
  stoppers.push(() => redis.disconnect());
  stoppers.push(() => coordinator.stop());
  stoppers.push(() => scheduler.stop());
  return { coordinator, scheduler };
}

async function start(r: Replica): Promise<void> {
  r.scheduler.start();
  await r.coordinator.start();
}

/** Every event of `type` the scheduler reports, heard through `scheduler.on` as a user would. */
function hear<K extends keyof SchedulerEventMap>(scheduler: Scheduler, type: K): Array<SchedulerEventMap[K][0]> {
  const heard: Array<SchedulerEventMap[K][0]> = [];
  (scheduler.on as (type: K, listener: (event: SchedulerEventMap[K][0]) => void) => Scheduler)(type, (event) => heard.push(event));
  return heard;
}

/** A ledger of effects: each fire id applied at most once, in the order applied. */
function ledger() {
  const applied: string[] = [];
  const calls = new Map<string, number>();
  return {
    applied,
    calls,
    call(envelope: Envelope): number {
      const n = (calls.get(envelope.fireId) ?? 0) + 1;
      calls.set(envelope.fireId, n);
      return n;
    },
    apply(envelope: Envelope): void {
      if (!applied.includes(envelope.fireId)) applied.push(envelope.fireId);
    },
  };
}

describe('a fire whose dispatch fails', () => {
  it('is dispatched again until it takes effect, exactly once, and the job\'s later fires wait behind it', async () => {
    prefix = uniquePrefix('delivery');
    const effects = ledger();
    let failing: string | undefined;
    const r = replica({
      invoices: {
        everyMs: 100,
        handler: async (envelope) => {
          const call = effects.call(envelope);
          failing ??= envelope.fireId;
          // The first fire's first two dispatches fail as a killed session would; then it works.
          if (envelope.fireId === failing && call <= 2) throw new Error('the guard lost its connection');
          effects.apply(envelope);
        },
      },
    });
    const failed = hear(r.scheduler, 'fire.failed');
    await start(r);
    await waitFor(() => effects.applied.length >= 3, 10_000);
    expect(effects.calls.get(failing!)).toBe(3);
    expect(effects.applied[0]).toBe(failing); // applied before any later fire
    expect(new Set(effects.applied).size).toBe(effects.applied.length);
    expect(failed.map((e) => [e.fireId, e.attempt])).toEqual([
      [failing, 1],
      [failing, 2],
    ]);
    for (const e of failed) expect(e.retryInMs).toBeGreaterThan(0);
    // The later fires, due meanwhile, went out only after it: in order, none skipped.
    const times = effects.applied.map((id) => parseFireId(id)!.scheduledAt);
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBe(100);
  });

  it('given up by its handler, is reported and never dispatched again, and the job goes on', async () => {
    prefix = uniquePrefix('delivery');
    const effects = ledger();
    let doomed: string | undefined;
    const r = replica({
      invoices: {
        everyMs: 100,
        handler: async (envelope) => {
          effects.call(envelope);
          doomed ??= envelope.fireId;
          if (envelope.fireId === doomed) throw new FireGivenUpError('the customer was deleted');
          effects.apply(envelope);
        },
      },
    });
    const givenUp = hear(r.scheduler, 'fire.given-up');
    await start(r);
    await waitFor(() => effects.applied.length >= 2, 10_000);
    expect(effects.calls.get(doomed!)).toBe(1);
    expect(givenUp).toHaveLength(1);
    expect(givenUp[0]).toMatchObject({ fireId: doomed, reason: 'the customer was deleted', attempts: 1 });
    expect(effects.applied).not.toContain(doomed);
  });

  it('still failing when it falls out of the catch-up window, is given up, reported, and the job goes on', async () => {
    prefix = uniquePrefix('delivery');
    const effects = ledger();
    let doomed: string | undefined;
    const r = replica(
      {
        invoices: {
          everyMs: 100,
          handler: async (envelope) => {
            effects.call(envelope);
            doomed ??= envelope.fireId;
            if (envelope.fireId === doomed) throw new Error('always down for this one');
            effects.apply(envelope);
          },
        },
      },
      { catchUpWindowMs: 400, retry: { minDelayMs: 20, maxDelayMs: 50 } },
    );
    const givenUp = hear(r.scheduler, 'fire.given-up');
    await start(r);
    await waitFor(() => effects.applied.length >= 2, 10_000);
    expect(givenUp.map((e) => e.fireId)).toEqual([doomed]);
    expect(givenUp[0]!.reason).toMatch(/catch-up window/);
    expect(effects.calls.get(doomed!)).toBeGreaterThan(1);
  });

  it('refused as stale, ends its term: that term dispatches it no more, and the next term is minted above the fence', async () => {
    prefix = uniquePrefix('delivery');
    const staleCalls: bigint[] = [];
    const r = replica({
      invoices: {
        everyMs: 50,
        handler: async (envelope) => {
          staleCalls.push(BigInt(envelope.token));
          // A fence five tokens ahead: a newer term wrote (or one minted before the lease store lost data).
          throw new StaleTokenError('invoices', parseToken(envelope.token), parseToken(BigInt(envelope.token) + 5n));
        },
      },
      refresh: { everyMs: 50, handler: () => undefined },
    });
    const stale = hear(r.scheduler, 'fire.stale');
    const lost: Array<{ token: bigint; reason: string }> = [];
    r.coordinator.on('lost', (event) => lost.push(event));
    await start(r);
    await waitFor(() => stale.length >= 3, 10_000);
    // One refusal per term: each ended its term (the lease given back), none dispatched twice in one.
    const tokens = stale.map((e) => e.token);
    expect(new Set(tokens).size).toBe(tokens.length);
    expect(new Set(staleCalls).size).toBe(staleCalls.length);
    await waitFor(() => lost.length >= 2, 10_000);
    expect(lost.slice(0, 2)).toEqual([expect.objectContaining({ token: tokens[0], reason: 'superseded' }), expect.objectContaining({ token: tokens[1], reason: 'superseded' })]);
    // The counter was raised to the fence's token: the next term is minted above it.
    expect(tokens[1]!).toBeGreaterThan(tokens[0]! + 5n);
  });

  it('still failing when its term ends, is dispatched by the next term (the catch-up starts from the last fire that took effect)', async () => {
    prefix = uniquePrefix('delivery');
    const effects = ledger();
    const failedOnA: string[] = [];
    // a's handler fails every fire (its database is unreachable from a); b's works.
    const a = replica({
      invoices: {
        everyMs: 100,
        handler: async (envelope) => {
          failedOnA.push(envelope.fireId);
          throw new Error('unreachable from a');
        },
      },
    });
    await start(a);
    await waitFor(() => failedOnA.length >= 3, 10_000);
    const first = failedOnA[0]!;
    const b = replica({ invoices: { everyMs: 100, handler: async (envelope) => effects.apply(envelope) } });
    await start(b);
    // a hands over as a deployment would: scheduler first, then the lease.
    await a.scheduler.stop();
    await a.coordinator.stop();
    await waitFor(() => effects.applied.length >= 3, 10_000);
    expect(new Set(failedOnA)).toEqual(new Set([first])); // a never got past its first fire
    expect(effects.applied[0]).toBe(first); // b dispatched it first
  });

  it('a returned failed-permanent outcome gives the fire up as a thrown FireGivenUpError does', async () => {
    prefix = uniquePrefix('delivery');
    const events: FencedEvent[] = [];
    let n = 0;
    const r = replica({ invoices: { everyMs: 100, handler: async () => (++n === 1 ? { status: 'failed-permanent', reason: 'bad row' } : undefined) } }, { logger: (e) => events.push(e) });
    await start(r);
    await waitFor(() => n >= 2, 10_000);
    expect(events.filter((e) => e.type === 'fire.given-up')).toMatchObject([{ reason: 'bad row', attempts: 1 }]);
    expect(events.filter((e) => e.type === 'fire.failed')).toEqual([]);
  });
});
