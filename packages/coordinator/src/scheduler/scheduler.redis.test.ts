import { dispatchKey, isFencedError, type Envelope, type FencedEvent } from '@fenced/shared';
import { failpoints } from '@fenced/shared/failpoints';
import { createRedis, deleteKeys, uniquePrefix, waitFor } from '#test-support';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createCoordinator, createScheduler, type Coordinator, type CreateSchedulerOptions, type Scheduler } from '../index.js';
import { leaseKeys } from '../store/redis/lease-keys.js';
import { schedulerScripts } from '../store/redis/scheduler-scripts.js';

let admin: Redis;
let prefix: string;
const stoppers: Array<() => Promise<void> | void> = [];
const keysOf = (c: Coordinator) => leaseKeys(prefix, c.lease);

beforeAll(() => {
  admin = createRedis();
});
afterAll(() => admin.disconnect());
afterEach(async () => {
  for (const stop of stoppers.splice(0).reverse()) await stop();
  await deleteKeys(admin, prefix);
});

/** Waits until every fire of an everyMs job due in [from, to] was dispatched (or the deadline passes). */
async function allDispatched(dispatched: readonly Envelope[], everyMs: number, from: number, to: number): Promise<void> {
  const wanted = expectedFires(everyMs, from, to);
  await waitFor(() => {
    const seen = new Set(dispatched.map((e) => Date.parse(e.scheduledAt)));
    return wanted.every((at) => seen.has(at));
  }, 20_000).catch(() => undefined); // the assertions that follow say what is missing
}

interface Replica {
  coordinator: Coordinator;
  scheduler: Scheduler;
  redis: Redis;
}

function replica(jobs: CreateSchedulerOptions['jobs'], extra: Partial<CreateSchedulerOptions> = {}): Replica {
  const redis = createRedis();
  const coordinator = createCoordinator({ redis, lease: 'cron', keyPrefix: prefix, ttlMs: 500, renewIntervalMs: 100, acquireRetryMs: 50 });
  const scheduler = createScheduler({ coordinator, jobs, tickMs: 10, ...extra });
  stoppers.push(() => redis.disconnect());
  stoppers.push(() => coordinator.stop());
  stoppers.push(() => scheduler.stop());
  return { coordinator, scheduler, redis };
}

async function startAll(replicas: Replica[]): Promise<void> {
  for (const r of replicas) r.scheduler.start();
  await Promise.all(replicas.map((r) => r.coordinator.start()));
}

/** Every fire time of an everyMs job in [from, to], as fire ids would name them. */
function expectedFires(everyMs: number, from: number, to: number): number[] {
  const out: number[] = [];
  for (let at = Math.ceil(from / everyMs) * everyMs; at <= to; at += everyMs) out.push(at);
  return out;
}

async function serverNow(): Promise<number> {
  const [s, us] = await admin.time();
  return Number(s) * 1000 + Number(us) / 1000;
}

describe('the scheduler', () => {
  it('dispatches each fire exactly once in a fault-free run, across graceful handovers, with the leader token', async () => {
    prefix = uniquePrefix('sched');
    const dispatched: Envelope[] = [];
    const tokensByNode = new Map<string, bigint[]>();
    const handler = async (e: Envelope) => void dispatched.push(e);
    const replicas = [replica({ tick: { everyMs: 100, handler } }), replica({ tick: { everyMs: 100, handler } }), replica({ tick: { everyMs: 100, handler } })];
    for (const r of replicas) r.coordinator.on('elected', ({ token }) => tokensByNode.set(r.coordinator.nodeId, [...(tokensByNode.get(r.coordinator.nodeId) ?? []), token]));
    await startAll(replicas);
    await waitFor(() => dispatched.length >= 3);
    const from = Date.parse(dispatched[0]!.scheduledAt);
    for (let i = 0; i < 3; i++) {
      await waitFor(() => replicas.some((r) => r.coordinator.isLeader()));
      const leader = replicas.find((r) => r.coordinator.isLeader())!;
      const before = dispatched.length;
      await waitFor(() => dispatched.length >= before + 2); // the term dispatches a little
      await leader.scheduler.stop();
      await leader.coordinator.stop(); // graceful: releases, a standby takes over at once
      leader.scheduler.start();
      await leader.coordinator.start();
    }
    await waitFor(() => replicas.some((r) => r.coordinator.isLeader()));
    const to = await serverNow();
    await allDispatched(dispatched, 100, from, to);
    const seen = dispatched.filter((e) => Date.parse(e.scheduledAt) <= to);
    const ids = seen.map((e) => e.fireId);
    expect(new Set(ids).size).toBe(ids.length); // no fire twice
    expect(seen.map((e) => Date.parse(e.scheduledAt)).sort((a, b) => a - b)).toEqual(expectedFires(100, from, to)); // none missing
    for (const e of seen) {
      expect(e.v).toBe(1);
      expect(tokensByNode.get(e.issuer)).toContain(BigInt(e.token));
    }
  });

  it('catches up fires that came due while nobody led (crash without release)', async () => {
    prefix = uniquePrefix('sched');
    const dispatched: Envelope[] = [];
    const handler = async (e: Envelope) => void dispatched.push(e);
    const a = replica({ tick: { everyMs: 50, handler } });
    await startAll([a]);
    await waitFor(() => dispatched.length >= 3);
    const b = replica({ tick: { everyMs: 50, handler } });
    await startAll([b]);
    const crashedAt = await serverNow();
    a.redis.disconnect(); // crash: a keeps no lease, records nothing more; b waits out the TTL
    await waitFor(() => b.coordinator.isLeader(), 5000, 2);
    // The new leader dispatches fires that came due after the crash (a, cut off from Redis, may
    // still dispatch until its own deadline, so the first of them can be a's).
    const byB = () => dispatched.filter((e) => e.issuer === b.coordinator.nodeId && Date.parse(e.scheduledAt) > crashedAt);
    await waitFor(() => byB().length > 0, 5000);
    const to = await serverNow();
    await allDispatched(dispatched, 50, Date.parse(dispatched[0]!.scheduledAt), to);
    const times = [...new Set(dispatched.map((e) => Date.parse(e.scheduledAt)))].filter((t) => t <= to).sort((x, y) => x - y);
    // No fire of the election window (about a TTL of them) is missing.
    expect(times).toEqual(expectedFires(50, times[0]!, to));
  });

  it('never has more fires in dispatch than its concurrency, and dispatches every due fire', async () => {
    prefix = uniquePrefix('sched');
    let running = 0;
    let most = 0;
    const gates: Array<() => void> = [];
    const seen = new Set<string>();
    const handler = async (e: Envelope) => {
      running++;
      most = Math.max(most, running);
      seen.add(e.job);
      await new Promise<void>((resolve) => gates.push(resolve));
      running--;
    };
    const names = ['a', 'b', 'c', 'd', 'e', 'f'];
    // Every job fires every hour, aligned: the election's baseline plans nothing, so the test arms
    // the fires itself by moving each job's record an hour back (a catch-up of one fire each).
    const a = replica(Object.fromEntries(names.map((n) => [n, { everyMs: 3_600_000, handler }])), { concurrency: 2, misfire: 'all' });
    const hourAgo = Math.floor((await serverNow()) / 3_600_000) * 3_600_000 - 3_600_000;
    await admin.hset(keysOf(a.coordinator).fires, { ':initialized': '1', ...Object.fromEntries(names.map((n) => [n, String(hourAgo)])) });
    await startAll([a]);
    // Release the handlers one at a time: each release frees a slot for the next job.
    for (let released = 0; released < names.length; released++) {
      await waitFor(() => gates.length > 0, 5000);
      gates.shift()!();
    }
    expect(most).toBe(2);
    expect([...seen].sort()).toEqual(names);
  });

  it('frees a dispatch slot when the fire is dispatched, before its record is written', async () => {
    prefix = uniquePrefix('sched');
    const started: string[] = [];
    const handler = (e: Envelope) => void started.push(e.job);
    const a = replica({ first: { everyMs: 3_600_000, handler }, second: { everyMs: 3_600_000, handler } }, { concurrency: 1, misfire: 'all' });
    const hourAgo = Math.floor((await serverNow()) / 3_600_000) * 3_600_000 - 3_600_000;
    await admin.hset(keysOf(a.coordinator).fires, { ':initialized': '1', first: String(hourAgo), second: String(hourAgo) });
    // The first fire's record waits until the second fire has been dispatched: with the slot held
    // through the record, the second could never start, and the gate would never open.
    let recording!: () => void;
    const held = new Promise<void>((r) => (recording = r));
    failpoints.arm('scheduler.dispatched-before-record', { kind: 'call', run: () => held });
    stoppers.push(() => failpoints.disarm(), () => recording()); // stoppers run last first: the record goes on, then stop
    await startAll([a]);
    await waitFor(() => started.length === 2, 5000);
    recording();
    expect(started.sort()).toEqual(['first', 'second']);
  });

  it('stops cleanly while a catch-up waits for a dispatch slot: the waiting drain dispatches nothing more', async () => {
    prefix = uniquePrefix('sched');
    const dispatched: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const a = replica(
      {
        // Two fires to catch up: after the first, the drain needs the only slot again.
        catchup: { everyMs: 3_600_000, handler: (e) => void dispatched.push(e.fireId) },
        slow: { everyMs: 3_600_000, handler: () => gate },
      },
      { concurrency: 1, misfire: 'all', catchUpWindowMs: 3 * 3_600_000 },
    );
    const hour = Math.floor((await serverNow()) / 3_600_000) * 3_600_000;
    await admin.hset(keysOf(a.coordinator).fires, { ':initialized': '1', catchup: String(hour - 2 * 3_600_000), slow: String(hour - 3_600_000) });
    await startAll([a]);
    await waitFor(() => dispatched.length === 1, 5000);
    // Once its first fire is recorded, the catch-up waits for the slot the slow job holds.
    stoppers.push(() => open()); // a failed assertion must not leave stop() waiting on the gate
    await waitFor(async () => (await admin.hget(keysOf(a.coordinator).fires, 'catchup')) === String(hour - 3_600_000), 5000);
    // Stop, then free the slot.
    const stopped = a.scheduler.stop();
    open();
    await stopped;
    expect(dispatched).toHaveLength(1);
  });

  it('keeps a fire whose payload function threw pending, reports it, and dispatches it once the function works', async () => {
    prefix = uniquePrefix('sched');
    const events: FencedEvent[] = [];
    const dispatched: Envelope[] = [];
    let calls = 0;
    const payload = (at: number) => {
      if (++calls === 1) throw new Error('payload source down');
      return { at };
    };
    const a = replica({ report: { everyMs: 3_600_000, payload, handler: (e) => void dispatched.push(e) } }, { misfire: 'all', logger: (e) => events.push(e) });
    const hour = Math.floor((await serverNow()) / 3_600_000) * 3_600_000;
    await admin.hset(keysOf(a.coordinator).fires, { ':initialized': '1', report: String(hour - 3_600_000) });
    await startAll([a]);
    await waitFor(() => dispatched.length === 1, 5000);
    const failed = events.filter((e) => e.type === 'fire.failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ job: 'report', fireId: dispatched[0]!.fireId });
    expect(dispatched[0]!.payload).toEqual({ at: hour });
  });

  it('dispatches nothing after its term ended, even in the middle of a catch-up batch (found by pnpm mutants)', async () => {
    prefix = uniquePrefix('sched');
    let skewMs = 0;
    const redis = createRedis();
    const coordinator = createCoordinator({ redis, lease: 'cron', keyPrefix: prefix, ttlMs: 500, renewIntervalMs: 100, acquireRetryMs: 50, clock: { now: () => performance.now() + skewMs } });
    const leadingAtDispatch: boolean[] = [];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let firstAt = 0;
    const scheduler = createScheduler({
      coordinator,
      tickMs: 10,
      jobs: {
        tick: {
          everyMs: 50,
          handler: async (e) => {
            leadingAtDispatch.push(coordinator.isLeader());
            // The first fire holds the drain, so that the fires coming due meanwhile form a batch.
            if (firstAt === 0) {
              firstAt = Date.parse(e.scheduledAt);
              await gate;
            }
          },
        },
      },
    });
    stoppers.push(() => redis.disconnect(), () => coordinator.stop(), () => scheduler.stop(), () => failpoints.disarm());
    // In the middle of the batch, this process's own clock says the term is over (a pause, a slow clock).
    let hit = false;
    failpoints.arm('scheduler.mid-catch-up', { kind: 'call', run: () => void ((hit = true), (skewMs += 10_000)) });
    scheduler.start();
    await coordinator.start();
    await waitFor(() => firstAt > 0, 5000);
    await waitFor(async () => (await serverNow()) >= firstAt + 150, 5000);
    open();
    await waitFor(() => hit, 5000);
    await waitFor(() => coordinator.isLeader(), 5000);
    expect(leadingAtDispatch.every(Boolean), `dispatched while not leading: ${leadingAtDispatch.join(', ')}`).toBe(true);
  });

  it('never lets a stale lease advance the scheduler state', async () => {
    prefix = uniquePrefix('sched');
    const a = replica({ tick: { everyMs: 1000, handler: () => undefined } });
    await startAll([a]);
    const stale = a.coordinator.currentTerm()!.leaseValue;
    await a.coordinator.stop();
    const b = replica({ tick: { everyMs: 1000, handler: () => undefined } });
    await startAll([b]);
    const scripts = schedulerScripts(admin);
    const keys = keysOf(a.coordinator);
    expect(await scripts.recordFires(keys.lease, keys.fires, stale, [{ job: 'tick', scheduledAt: 99999999999999 }])).toBe(0);
    expect(await admin.hget(keys.fires, 'tick')).not.toBe('99999999999999');
    expect(await scripts.recordFires(keys.lease, keys.fires, b.coordinator.currentTerm()!.leaseValue, [{ job: 'tick', scheduledAt: 5 }])).toBe(1);
  });

  it('hands fires to a BullMQ queue with the dispatch key (fire id and term) as job id, so a second copy by the term is dropped', async () => {
    prefix = uniquePrefix('sched');
    const { Queue } = await import('bullmq');
    const connection = createRedis(undefined, { maxRetriesPerRequest: null });
    const queue = new Queue('fires', { connection, prefix });
    stoppers.push(() => connection.disconnect());
    stoppers.push(() => queue.close());
    const a = replica({ ledger: { everyMs: 100, queue } });
    await startAll([a]);
    await waitFor(async () => (await queue.getJobs(['waiting', 'delayed', 'active', 'completed'])).length >= 3);
    await a.scheduler.stop();
    const jobs = await queue.getJobs(['waiting', 'delayed', 'active', 'completed']);
    expect(jobs.length).toBeGreaterThanOrEqual(3);
    const first = jobs[0]!;
    expect(first.id).toBe(dispatchKey(first.data as Envelope));
    // A second dispatch of the same fire by the same term (a retried enqueue) is dropped.
    await queue.add('ledger', first.data, { jobId: first.id! });
    expect((await queue.getJobs(['waiting', 'delayed', 'active', 'completed'])).length).toBe(jobs.length);
  });

  it('rejects bad jobs with a ConfigError naming the field', () => {
    prefix = uniquePrefix('sched');
    const coordinator = createCoordinator({ redis: admin, lease: 'cron', keyPrefix: prefix });
    const bad: Array<[CreateSchedulerOptions['jobs'], string]> = [
      [{ a: { cron: '61 * * * *', handler: () => 1 } }, 'jobs.a.cron'],
      [{ a: { cron: '0 * * * *', timezone: 'Mars/Olympus', handler: () => 1 } }, 'jobs.a.timezone'],
      [{ a: { cron: '0 * * * *', everyMs: 100, handler: () => 1 } }, 'jobs.a.cron'],
      [{ a: { everyMs: 100 } }, 'jobs.a.handler'],
      [{ 'a:b': { everyMs: 100, handler: () => 1 } }, 'jobs.a:b'],
      [{ a: { everyMs: 1, handler: () => 1 } }, 'jobs.a.everyMs'],
    ];
    for (const [extra, path] of [
      [{ seal: 'sign it' }, 'seal'],
      [{ recoverLastFired: 42 }, 'recoverLastFired'],
    ] as const) {
      let caught: unknown;
      try {
        createScheduler({ coordinator, jobs: { a: { everyMs: 100, handler: () => 1 } }, ...(extra as object) });
      } catch (err) {
        caught = err;
      }
      expect(isFencedError(caught, 'INVALID_CONFIG'), path).toBe(true);
      expect((caught as { issues: { path: string }[] }).issues.map((i) => i.path)).toContain(path);
    }
    for (const [jobs, path] of bad) {
      let caught: unknown;
      try {
        createScheduler({ coordinator, jobs });
      } catch (err) {
        caught = err;
      }
      expect(isFencedError(caught, 'INVALID_CONFIG'), path).toBe(true);
      expect((caught as { issues: { path: string }[] }).issues.map((i) => i.path).join(' ')).toContain(path);
    }
  });

  it('reports skipped fires under misfire skip', async () => {
    prefix = uniquePrefix('sched');
    const events: FencedEvent[] = [];
    const dispatched: Envelope[] = [];
    const handler = async (e: Envelope) => void dispatched.push(e);
    const a = replica({ tick: { everyMs: 50, handler } }, { misfire: 'skip', logger: (e) => events.push(e) });
    await startAll([a]);
    await waitFor(() => dispatched.length >= 2);
    await a.scheduler.stop();
    await a.coordinator.stop();
    // At least six fires come due with nobody leading (by the server's clock, which dispatch uses).
    const stoppedAt = await serverNow();
    await waitFor(async () => (await serverNow()) >= stoppedAt + 300);
    const before = dispatched.length;
    const restartedAt = await serverNow();
    a.scheduler.start();
    await a.coordinator.start();
    await waitFor(() => events.some((e) => e.type === 'fire.skipped'));
    expect(events.some((e) => e.type === 'fire.skipped' && e.missed >= 4)).toBe(true);
    // Nothing that came due before the new term was dispatched after the restart.
    const late = dispatched.slice(before).filter((e) => Date.parse(e.scheduledAt) <= restartedAt);
    expect(late.map((e) => e.fireId)).toEqual([]);
  });
});

describe('what the scheduler records for operators', () => {
  it('when each job last fire was dispatched, and the gap a new term closed with its first dispatch', async () => {
    prefix = uniquePrefix('sched');
    const dispatched: Array<{ node: string; at: number; envelope: Envelope }> = [];
    const job = (node: string) => ({ ticks: { everyMs: 100, handler: async (envelope: Envelope) => void dispatched.push({ node, at: await serverNow(), envelope }) } });
    const a = replica(job('a'));
    await startAll([a]);
    await waitFor(() => dispatched.length >= 2, 10_000);
    const fires = keysOf(a.coordinator).fires;
    await waitFor(async () => (await admin.hget(fires, ':dispatched:ticks')) !== null);
    const lastOfA = async () => Number(await admin.hget(fires, ':dispatched:ticks'));
    expect(await lastOfA()).toBeGreaterThanOrEqual(Number(await admin.hget(fires, 'ticks')));
    expect(await admin.hget(fires, ':failover-gap')).toBeNull(); // one term so far: no gap to measure

    const b = replica(job('b'));
    await startAll([b]);
    await a.scheduler.stop();
    const aRecorded = await lastOfA();
    await a.coordinator.stop();
    await waitFor(async () => (await admin.hget(fires, ':failover-gap')) !== null, 10_000);
    const gap = Number(await admin.hget(fires, ':failover-gap'));
    const firstOfB = dispatched.find((d) => d.node === 'b')!;
    // From A's last recorded dispatch to B's first, by the server clock: never negative, and no more
    // than the time between them as the test saw it (plus the clock's millisecond rounding).
    expect(gap).toBeGreaterThanOrEqual(0);
    expect(gap).toBeLessThanOrEqual(firstOfB.at - aRecorded + 2);
  });
});

describe('a queue that refuses a fire', () => {
  it('gets it again on a later tick, before the job\'s next fire is due, and in order (the fire stays pending, never lost)', async () => {
    prefix = uniquePrefix('sched');
    const added: Array<{ envelope: Envelope; at: number }> = [];
    let refusals = 0;
    const events: FencedEvent[] = [];
    const queue = {
      async add(_name: string, data: unknown) {
        // The first two adds fail, as a queue's Redis going away for a moment would.
        if (refusals < 2) {
          refusals++;
          throw new Error('queue unavailable');
        }
        added.push({ envelope: data as Envelope, at: await serverNow() });
      },
    };
    const everyMs = 2000;
    const r = replica({ ticks: { everyMs, queue } }, { logger: (e) => events.push(e) });
    await startAll([r]);
    await waitFor(() => added.length >= 2, 15_000);
    expect(events.filter((e) => e.type === 'fire.failed')).toHaveLength(2);
    // The refused fire went in on a retry, not carried along by the next fire coming due; then the
    // job went on with the next one, none skipped.
    const [first, second] = added;
    expect(first!.at).toBeLessThan(Date.parse(first!.envelope.scheduledAt) + everyMs);
    expect(Date.parse(second!.envelope.scheduledAt) - Date.parse(first!.envelope.scheduledAt)).toBe(everyMs);
  });
});
