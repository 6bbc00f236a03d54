import { startFaultProxy, type FaultProxy } from '@fenced/chaos';
import { createCoordinator, createScheduler, type Coordinator, type Scheduler } from '@fenced/coordinator';
import type { Envelope } from '@fenced/shared';
import { createRedis, deleteKeys, testRedisUrl, uniquePrefix, waitFor } from '#test-support';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';

const stoppers: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const stop of stoppers.splice(0).reverse()) await stop();
});

describe('due times by the server clock', () => {
  // The test's Redis runs on this host, so the server's clock is this host's wall clock: a handler
  // that starts at Date.now() < scheduledAt started early by the server's clock. Requests reach Redis
  // late (the proxy holds them 150 ms) while replies come straight back, as on a loaded client: the
  // server reads its clock near the end of each round trip, and an estimate that places the reading
  // in the middle runs ahead by half the delay.
  it('never starts a fire before it is due, even when requests reach Redis late', async () => {
    const prefix = uniquePrefix('clock');
    const redisUrl = new URL(testRedisUrl());
    const proxy: FaultProxy = await startFaultProxy(Number(redisUrl.port || 6379), { host: redisUrl.hostname });
    stoppers.push(() => proxy.close());
    proxy.setMode({ kind: 'delay', delayMs: 150, only: 'requests' });
    const redis: Redis = createRedis(`redis://127.0.0.1:${proxy.port}`);
    stoppers.push(() => redis.disconnect());
    const admin = createRedis();
    stoppers.push(() => admin.disconnect());
    stoppers.push(() => deleteKeys(admin, prefix));

    const started: Array<{ scheduledAt: number; startedAt: number }> = [];
    const coordinator: Coordinator = createCoordinator({ redis, lease: 'clock', keyPrefix: prefix, ttlMs: 3000, renewIntervalMs: 400 });
    // Several jobs, each firing less often than a delayed round trip takes, so that no fire waits
    // behind the record of the one before it: each fire goes out as soon as the leader thinks it due.
    const handler = (envelope: Envelope) => void started.push({ scheduledAt: Date.parse(envelope.scheduledAt), startedAt: Date.now() });
    const jobs = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`job-${i}`, { everyMs: 400, handler }]));
    const scheduler: Scheduler = createScheduler({ coordinator, tickMs: 2, jobs });
    stoppers.push(() => coordinator.stop());
    stoppers.push(() => scheduler.stop());
    scheduler.start();
    await coordinator.start();
    // Enough fires, across several renews (each one a new sample of the server's clock).
    await waitFor(() => started.length >= 40, 30_000);

    const early = started.filter((f) => f.startedAt < f.scheduledAt).map((f) => `${f.scheduledAt - f.startedAt} ms early`);
    expect(early).toEqual([]);
  });

  // This process's wall clock runs a minute ahead of the server's (Date alone is faked: timers and the
  // monotonic clock run true, as on a host whose NTP stepped the clock). Due times are read off the
  // server's clock, so nothing starts early; the real time comes from performance, which is unfaked.
  it("never starts a fire early when this process's wall clock runs ahead of the server's", async () => {
    const realNow = () => performance.timeOrigin + performance.now();
    vi.useFakeTimers({ toFake: ['Date'], now: realNow() + 60_000 });
    stoppers.push(() => vi.useRealTimers());
    const prefix = uniquePrefix('clock-ahead');
    const redis: Redis = createRedis();
    stoppers.push(() => redis.disconnect());
    stoppers.push(() => deleteKeys(redis, prefix));
    const started: Array<{ scheduledAt: number; startedAt: number }> = [];
    const coordinator: Coordinator = createCoordinator({ redis, lease: 'clock-ahead', keyPrefix: prefix, ttlMs: 3000, renewIntervalMs: 400 });
    const handler = (envelope: Envelope) => void started.push({ scheduledAt: Date.parse(envelope.scheduledAt), startedAt: realNow() });
    const scheduler: Scheduler = createScheduler({ coordinator, tickMs: 5, jobs: { ahead: { everyMs: 200, handler } } });
    stoppers.push(() => coordinator.stop());
    stoppers.push(() => scheduler.stop());
    scheduler.start();
    await coordinator.start();
    await waitFor(() => started.length >= 5, 30_000);

    // performance.timeOrigin drifts from the wall clock by a few ms at most; the bug is a minute.
    const early = started.filter((f) => f.startedAt < f.scheduledAt - 50).map((f) => `${Math.round(f.scheduledAt - f.startedAt)} ms early`);
    expect(early).toEqual([]);
  });
});
