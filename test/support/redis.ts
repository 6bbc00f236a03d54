import { randomBytes } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import { inject } from 'vitest';

export function testRedisUrl(): string {
  return inject('redisUrl');
}

/** A key prefix unique to this run and call, so concurrent runs on one Redis never collide. */
export function uniquePrefix(label = 't'): string {
  return `fenced-test-${label}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/** A client on the test Redis. Errors are swallowed: tests assert on behaviour, not on log noise. */
export function createRedis(url = testRedisUrl(), options: RedisOptions = {}): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: 1, ...options });
  redis.on('error', () => {});
  return redis;
}

/** Deletes every key under `prefix` (SCAN, never KEYS). */
export async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

/**
 * What `promise` settles with, or `late` once `timeoutMs` have passed first: for a test that shows
 * something does not wait (a bounded wait, never a sleep), without leaving its timer behind.
 */
export async function resultWithin<T, L>(promise: Promise<T>, timeoutMs: number, late: L): Promise<T | L> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([promise, new Promise<L>((resolve) => (timer = setTimeout(() => resolve(late), timeoutMs)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves when `predicate` holds, polling every `everyMs`; rejects after `timeoutMs`. */
export async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs = 5000, everyMs = 5): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await predicate())) {
    if (performance.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
