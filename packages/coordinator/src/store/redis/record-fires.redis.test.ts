import { createRedis, deleteKeys, uniquePrefix } from '#test-support';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { schedulerScripts } from './scheduler-scripts.js';

// The record script on its own: what it promises whoever calls it, batch by batch.
let redis: Redis;
let prefix: string;
const lease = () => `${prefix}:{cron}:lease`;
const fires = () => `${prefix}:{cron}:fires`;
const OURS = '7:node-a';

beforeAll(() => {
  redis = createRedis();
});
afterAll(() => redis.disconnect());
afterEach(async () => deleteKeys(redis, prefix));

describe('record-fires script', () => {
  it('records every job of a batch with its dispatch time, a baseline without one, and the failover gap', async () => {
    prefix = uniquePrefix('recfires');
    await redis.set(lease(), OURS);
    const scripts = schedulerScripts(redis);
    const answer = await scripts.recordFires(
      lease(),
      fires(),
      OURS,
      [
        { job: 'a', scheduledAt: 1000, dispatchedAt: 1003 },
        { job: 'b', scheduledAt: 2000, dispatchedAt: 2001 },
        { job: 'c', scheduledAt: 500 },
      ],
      42,
    );
    expect(answer).toBe(1);
    expect(await redis.hgetall(fires())).toEqual({ a: '1000', ':dispatched:a': '1003', b: '2000', ':dispatched:b': '2001', c: '500', ':failover-gap': '42' });
  });

  it('takes a batch of no fires, whole triples all the same: it records the failover gap alone, or nothing', async () => {
    prefix = uniquePrefix('recfires');
    await redis.set(lease(), OURS);
    const scripts = schedulerScripts(redis);
    expect(await scripts.recordFires(lease(), fires(), OURS, [])).toBe(1);
    expect(await redis.exists(fires())).toBe(0);
    expect(await scripts.recordFires(lease(), fires(), OURS, [], 42)).toBe(1);
    expect(await redis.hgetall(fires())).toEqual({ ':failover-gap': '42' });
  });

  it('keeps a later or the same fire already recorded: a record never moves a job back, nor its dispatch time', async () => {
    prefix = uniquePrefix('recfires');
    await redis.set(lease(), OURS);
    await redis.hset(fires(), { a: '5000', ':dispatched:a': '5001' });
    const scripts = schedulerScripts(redis);
    expect(await scripts.recordFires(lease(), fires(), OURS, [{ job: 'a', scheduledAt: 4000, dispatchedAt: 4002 }, { job: 'b', scheduledAt: 1 }])).toBe(1);
    expect(await redis.hgetall(fires())).toEqual({ a: '5000', ':dispatched:a': '5001', b: '1' });
    // The same fire recorded again (a dispatch retried): the first dispatch time stands.
    expect(await scripts.recordFires(lease(), fires(), OURS, [{ job: 'a', scheduledAt: 5000, dispatchedAt: 5900 }])).toBe(1);
    expect(await redis.hgetall(fires())).toEqual({ a: '5000', ':dispatched:a': '5001', b: '1' });
  });

  it('compares a job named twice in one batch with what the batch recorded before it, as separate calls would', async () => {
    prefix = uniquePrefix('recfires');
    await redis.set(lease(), OURS);
    const scripts = schedulerScripts(redis);
    const batch = [
      { job: 'later-first', scheduledAt: 3000, dispatchedAt: 3001 },
      { job: 'later-first', scheduledAt: 2000, dispatchedAt: 2001 },
      { job: 'in-order', scheduledAt: 2000, dispatchedAt: 2001 },
      { job: 'in-order', scheduledAt: 3000, dispatchedAt: 3001 },
      { job: 'then-baseline', scheduledAt: 1000, dispatchedAt: 1001 },
      { job: 'then-baseline', scheduledAt: 5000 },
    ];
    expect(await scripts.recordFires(lease(), fires(), OURS, batch)).toBe(1);
    expect(await redis.hgetall(fires())).toEqual({
      'later-first': '3000',
      ':dispatched:later-first': '3001',
      'in-order': '3000',
      ':dispatched:in-order': '3001',
      'then-baseline': '5000',
      ':dispatched:then-baseline': '1001',
    });
  });

  it('records a batch of 500 fires, the most the scheduler sends in one call', async () => {
    prefix = uniquePrefix('recfires');
    await redis.set(lease(), OURS);
    const scripts = schedulerScripts(redis);
    const batch = Array.from({ length: 500 }, (_, i) => ({ job: `job-${i}`, scheduledAt: 1000 + i, dispatchedAt: 2000 + i }));
    expect(await scripts.recordFires(lease(), fires(), OURS, batch, 7)).toBe(1);
    const stored = await redis.hgetall(fires());
    expect(Object.keys(stored)).toHaveLength(1001);
    expect([stored['job-0'], stored['job-499'], stored[':dispatched:job-499'], stored[':failover-gap']]).toEqual(['1000', '1499', '2499', '7']);
  });

  it('changes nothing for a lease value that is not the current one, or no lease at all', async () => {
    prefix = uniquePrefix('recfires');
    const scripts = schedulerScripts(redis);
    const batch = [{ job: 'a', scheduledAt: 1000, dispatchedAt: 1000 }, { job: 'b', scheduledAt: 1000, dispatchedAt: 1000 }];
    expect(await scripts.recordFires(lease(), fires(), OURS, batch, 5)).toBe(0);
    await redis.set(lease(), '8:node-b');
    expect(await scripts.recordFires(lease(), fires(), OURS, batch, 5)).toBe(0);
    expect(await redis.exists(fires())).toBe(0);
  });

  it('refuses arguments that are not whole triples of a job and times, before changing anything', async () => {
    prefix = uniquePrefix('recfires');
    await redis.set(lease(), OURS);
    // The raw script, as an older or broken caller could send it.
    const raw = (...args: string[]) => (redis as unknown as Record<string, (...a: string[]) => Promise<unknown>>)['record-fires_fenced1']!(...args);
    await expect(raw(lease(), fires(), OURS, '', 'a', '1000')).rejects.toThrow(/record-fires: expected/);
    await expect(raw(lease(), fires(), OURS)).rejects.toThrow(/record-fires: expected/);
    await expect(raw(lease(), fires(), OURS, '', 'a', '1000', '1001', 'b', 'soon', '')).rejects.toThrow(/epoch milliseconds/);
    await expect(raw(lease(), fires(), OURS, '', 'a', '1000', 'later')).rejects.toThrow(/epoch milliseconds/);
    expect(await redis.exists(fires())).toBe(0);
  });
});
