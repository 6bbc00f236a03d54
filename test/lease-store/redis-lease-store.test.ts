/**
 * The Redis lease store's adapter (redis-lease-store.ts) where the conformance suite does not look:
 * a refusal read into the coordinator's terms (a holder no store wrote, the server's clock), what it
 * records of an election, and what a call that outlasts its timeout says. Its Sentinel half (the
 * primary's confirmation of every renew) is in test/redis/redis-sentinel.test.ts. (Written for
 * StrykerJS's survivors on the adapter.)
 */
import { startRedisServer, type RedisServerProcess } from '@fenced/chaos';
import { leaseKeys, redisLeases } from '@fenced/coordinator';
import { parseToken } from '@fenced/shared';
import { caught, createRedis, deleteKeys, uniquePrefix, waitFor } from '#test-support';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const prefix = uniquePrefix('redis-adapter');
let redis: Redis;
let n = 0;
const lease = () => `adapter-${++n}`;
const openLease = (name: string, nodeId = 'node-a') => redisLeases(redis, { keyPrefix: prefix }).openLease(name, nodeId, 5000);

beforeAll(() => {
  redis = createRedis();
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  redis.disconnect();
});

/** The server's clock now, in seconds. */
const serverSeconds = async () => Number((await redis.time())[0]);

describe("the Redis lease store's adapter", () => {
  it('a refusal names the holder, the time its lease has left and the server’s clock', async () => {
    const name = lease();
    const won = await openLease(name, 'node-b').acquire(10_000, 5000);
    if (!won.won) throw new Error('not granted');
    const before = await serverSeconds();
    const refused = await openLease(name).acquire(10_000, 5000);
    expect(refused).toMatchObject({ won: false, holder: { value: won.leaseValue, token: won.token, ours: false } });
    if (refused.won) return;
    expect(refused.remainingMs).toBeGreaterThan(0);
    expect(refused.remainingMs).toBeLessThanOrEqual(10_000);
    // The refusal's time is the server's (TIME inside the script), as a grant's is.
    expect(Number(refused.time.sec)).toBeGreaterThanOrEqual(before);
    expect(Number(refused.time.sec)).toBeLessThanOrEqual(await serverSeconds());
    expect(Number(refused.time.usec)).toBeGreaterThanOrEqual(0);
    expect(Number(refused.time.usec)).toBeLessThan(1_000_000);
  });

  it('a lease key holding a value no store wrote is a refusal with no holder, not a crash', async () => {
    const name = lease();
    // An operator's hand, or another program on the same prefix: not `<token>:<nodeId>`.
    await redis.set(leaseKeys(prefix, name).lease, 'not a lease value', 'PX', 5000);
    const refused = await openLease(name).acquire(10_000, 5000);
    expect(refused).toMatchObject({ won: false, holder: null });
    if (refused.won) return;
    expect(refused.remainingMs).toBeGreaterThan(0);
    expect(refused.remainingMs).toBeLessThanOrEqual(5000);
  });

  it('records each election in its stream: token, node, TTL, the fences it advanced and whether it repaired the counter', async () => {
    const name = lease();
    const store = openLease(name);
    const won = await store.acquire(10_000, 5000);
    if (!won.won) throw new Error('not granted');
    store.recordElection({ token: won.token, ttlMs: 10_000, fences: 2, regressed: true });
    store.recordElection({ token: won.token, ttlMs: 10_000, fences: 0, regressed: false });
    const entries = async () => (await redis.xrange(leaseKeys(prefix, name).elections, '-', '+')).map(([, fields]) => fields);
    await waitFor(async () => (await entries()).length === 2, 5000);
    const token = won.token.toString();
    expect(await entries()).toEqual([
      ['token', token, 'node', 'node-a', 'ttl', '10000', 'fences', '2', 'regressed', '1'],
      ['token', token, 'node', 'node-a', 'ttl', '10000', 'fences', '0', 'regressed', '0'],
    ]);
  });
});

describe("the Redis lease store's adapter on a frozen server (SIGSTOP)", () => {
  let server: RedisServerProcess;
  let frozen: Redis;
  beforeAll(async () => {
    server = await startRedisServer();
    frozen = createRedis(server.url);
  }, 60_000);
  afterAll(async () => {
    frozen?.disconnect();
    await server?.stop();
  });

  it('names the operation that outlasted its timeout: acquire, renew, release, raise counter', async () => {
    const name = lease();
    const store = redisLeases(frozen, { keyPrefix: prefix }).openLease(name, 'node-a', 5000);
    const won = await store.acquire(60_000, 5000);
    if (!won.won) throw new Error('not granted');
    server.pause();
    try {
      const errors = [
        [await caught(store.acquire(60_000, 300)), 'acquire'],
        [await caught(store.renew(won.leaseValue, 60_000, () => 300)), 'renew'],
        [await caught(store.release(won.leaseValue, 300)), 'release'],
        [await caught(store.raiseCounter(parseToken(won.token + 10n), 300)), 'raise counter'],
      ] as const;
      for (const [error, operation] of errors) {
        expect(error).toMatchObject({ name: 'TimeoutError', message: `${operation} timed out after 300 ms` });
      }
    } finally {
      server.resume();
    }
  });
});

describe('the release hub (a lease group’s one subscriber connection)', () => {
  it('closed while a subscription is being made: the listen says so, no failure of the store is reported, and nothing listens on the channel', async () => {
    const errors: unknown[] = [];
    const hub = await redisLeases(redis, { keyPrefix: prefix }).openReleaseHub(5000, (error) => errors.push(error));
    const name = lease();
    const listening = hub.listen(name, () => undefined);
    hub.close();
    await expect(listening).rejects.toThrow(`the release hub was closed while ${name}'s subscription was being made`);
    expect(errors).toEqual([]);
    expect(await redis.pubsub('NUMSUB', leaseKeys(prefix, name).released)).toEqual([leaseKeys(prefix, name).released, 0]);
  });
});
