import { isFencedError, type FencedEvent, type Token } from '@fenced/shared';
import { createRedis, deleteKeys, uniquePrefix, waitFor } from '#test-support';
import type { Redis } from 'ioredis';
import { failpoints } from '@fenced/shared/failpoints';
import { startRedisServer } from '@fenced/chaos';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator, createCoordinator, type CreateCoordinatorOptions } from '../index.js';
import { leaseKeys } from '../store/redis/lease-keys.js';

let admin: Redis;
let prefix: string;
const started: Coordinator[] = [];
const clients: Redis[] = [];
const keysOf = (c: Coordinator) => leaseKeys(prefix, c.lease);

beforeAll(() => {
  admin = createRedis();
});
afterAll(async () => {
  admin.disconnect();
});
afterEach(async () => {
  await Promise.all(started.splice(0).map((c) => c.stop()));
  for (const c of clients.splice(0)) c.disconnect();
  await deleteKeys(admin, prefix);
});

function coordinator(overrides: Partial<CreateCoordinatorOptions> = {}): Coordinator {
  const redis = createRedis();
  clients.push(redis);
  prefix ??= uniquePrefix('coord');
  const c = createCoordinator({ redis, lease: 'billing', keyPrefix: prefix, ttlMs: 600, renewIntervalMs: 150, ...overrides });
  started.push(c);
  return c;
}

const leaders = (cs: Coordinator[]) => cs.filter((c) => c.isLeader());

describe('the lease', () => {
  it('a release that arrives while an acquire is in flight is not lost: the standby tries again at once', async () => {
    // Found at scale: a release published while a standby's acquire was on its way (that acquire saw
    // the lease held) joined the attempt in flight, which then waited a whole retry interval.
    prefix = uniquePrefix('coord');
    const retryMs = 8000;
    const a = coordinator({ ttlMs: 20_000, renewIntervalMs: 5000, acquireRetryMs: retryMs, nodeId: 'a' });
    await a.start();
    await waitFor(() => a.isLeader());
    const b = coordinator({ ttlMs: 20_000, renewIntervalMs: 5000, acquireRetryMs: retryMs, nodeId: 'b' });
    const watcher = createRedis();
    clients.push(watcher);
    const releasedSeen = new Promise<void>((resolve) => watcher.on('message', () => resolve()));
    await watcher.subscribe(keysOf(a).released);
    // b's first acquire is sent (and, a still leading, finds the lease held); before its reply is read,
    // a steps down and its release reaches b's subscriber.
    failpoints.arm('lease.acquire-sent-before-reply', {
      kind: 'call',
      run: async () => {
        await a.stop();
        await releasedSeen;
        // Let b's subscriber, which got the same message, handle it first.
        for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
      },
    });
    try {
      const startedAt = performance.now();
      await b.start();
      await waitFor(() => b.isLeader(), retryMs * 2);
      expect(performance.now() - startedAt, 'b waited for its retry interval').toBeLessThan(retryMs / 2);
    } finally {
      failpoints.disarm();
    }
  });

  it('elects one leader among three, and tokens strictly increase over every election', async () => {
    prefix = uniquePrefix('coord');
    const nodes = [coordinator(), coordinator(), coordinator()];
    const elected: Token[] = [];
    for (const n of nodes) n.on('elected', ({ token }) => elected.push(token));
    await Promise.all(nodes.map((n) => n.start()));
    await waitFor(() => leaders(nodes).length === 1);

    // Hand leadership around: each round the leader steps down (stop) and rejoins.
    let maxSimultaneous = 0;
    const sampler = setInterval(() => (maxSimultaneous = Math.max(maxSimultaneous, leaders(nodes).length)), 2);
    for (let round = 0; round < 6; round++) {
      const [leader] = leaders(nodes);
      await leader!.stop();
      await waitFor(() => leaders(nodes).length === 1);
      await leader!.start();
    }
    clearInterval(sampler);
    expect(maxSimultaneous).toBe(1);
    expect(elected.length).toBeGreaterThanOrEqual(7);
    for (let i = 1; i < elected.length; i++) expect(elected[i]!).toBeGreaterThan(elected[i - 1]!);
  });

  it('fails over after a crash (no release) within TTL + renew interval', async () => {
    prefix = uniquePrefix('coord');
    const crashRedis = createRedis();
    clients.push(crashRedis);
    const a = coordinator({ redis: crashRedis });
    await a.start();
    await waitFor(() => a.isLeader());
    const b = coordinator();
    await b.start();
    expect(b.isLeader()).toBe(false);
    const crashedAt = performance.now();
    crashRedis.disconnect(); // the connection dies: no renew, no release
    await waitFor(() => b.isLeader(), 5000, 2);
    const failover = performance.now() - crashedAt;
    // The lease runs out within a TTL and b asks again within a renew interval; the rest is slack for
    // a loaded machine's late timers. Waiting for two TTLs would still fail this.
    expect(failover).toBeLessThan(600 + 150 + 400);
    expect(b.token()!).toBeGreaterThan(0n);
    // The crashed node knows it lost by its own deadline, without Redis.
    await waitFor(() => !a.isLeader(), 1000);
  });

  it('hands over in well under a second on a graceful stop', async () => {
    prefix = uniquePrefix('coord');
    const a = coordinator({ ttlMs: 10_000, renewIntervalMs: 2_000 });
    const b = coordinator({ ttlMs: 10_000, renewIntervalMs: 2_000 });
    await a.start();
    await b.start();
    expect(a.isLeader()).toBe(true);
    const stoppedAt = performance.now();
    await a.stop();
    await waitFor(() => b.isLeader(), 5000, 1);
    // b polls only every 2 s: being elected well before that is the release's wake-up at work.
    expect(performance.now() - stoppedAt).toBeLessThan(1000);
  });

  it('steps down at its local deadline when renews stop reaching Redis', async () => {
    prefix = uniquePrefix('coord');
    const redis = createRedis();
    clients.push(redis);
    const a = coordinator({ redis });
    const lost: string[] = [];
    a.on('lost', ({ reason }) => lost.push(reason));
    await a.start();
    expect(a.isLeader()).toBe(true);
    const term = a.currentTerm()!;
    redis.disconnect();
    await waitFor(() => !a.isLeader(), 1000, 2);
    expect(term.signal.aborted).toBe(true);
    await waitFor(() => lost.length > 0);
    expect(lost).toEqual(['deadline']);
  });

  it('a lapsed term reports when it ended: its deadline, the instant isLeader() turned false, even when the event comes late', async () => {
    prefix = uniquePrefix('coord');
    const redis = createRedis();
    clients.push(redis);
    // A clock the test moves: the renews stop (Redis cut), then time jumps past the deadline at once,
    // as after a pause; the term's end is the deadline, not the moment the jump was noticed.
    let now = 1_000_000;
    const a = coordinator({ redis, clock: { now: () => now } });
    const ended: number[] = [];
    a.on('lost', ({ reason, endedAt }) => reason === 'deadline' && ended.push(endedAt));
    const sentAt = now;
    await a.start();
    expect(a.isLeader()).toBe(true);
    redis.disconnect();
    const deadline = sentAt + a.ttlMs - a.driftMs;
    now = deadline - 1;
    expect(a.isLeader()).toBe(true);
    now = deadline + 5_000;
    expect(a.isLeader()).toBe(false);
    await waitFor(() => ended.length === 1);
    expect(ended).toEqual([deadline]);
  });

  it('loses the lease when another term holds it: a renew extends only its own term (found by pnpm mutants)', async () => {
    prefix = uniquePrefix('coord');
    const a = coordinator();
    const lost: string[] = [];
    a.on('lost', ({ reason }) => lost.push(reason));
    await a.start();
    expect(a.isLeader()).toBe(true);
    // Another node's term in the key (as after a lapse a's clock did not see): a's renews must fail.
    await admin.set(keysOf(a).lease, '999:other', 'PX', 60_000);
    await waitFor(() => lost.length > 0, 10_000);
    expect(lost).toEqual(['stolen']);
    expect(await admin.pttl(keysOf(a).lease)).toBeGreaterThan(50_000);
  });

  it('gives back only its own term: stopping never deletes a lease another node holds (found by pnpm mutants)', async () => {
    prefix = uniquePrefix('coord');
    const a = coordinator();
    await a.start();
    expect(a.isLeader()).toBe(true);
    await admin.set(keysOf(a).lease, '999:other', 'PX', 60_000);
    await a.stop();
    expect(await admin.get(keysOf(a).lease)).toBe('999:other');
  });

  it('withLeadership hands fn a signal that aborts on loss, and refuses non-leaders', async () => {
    prefix = uniquePrefix('coord');
    const a = coordinator();
    const b = coordinator();
    await a.start();
    await b.start();
    const leader = a.isLeader() ? a : b;
    const standby = leader === a ? b : a;
    let caught: unknown;
    await standby.withLeadership(async () => 1).catch((err: unknown) => (caught = err));
    expect(isFencedError(caught, 'NOT_LEADER')).toBe(true);
    const aborted = leader.withLeadership(
      ({ signal }) => new Promise<string>((resolve) => signal.addEventListener('abort', () => resolve('aborted'))),
    );
    await leader.stop();
    expect(await aborted).toBe('aborted');
  });

  it('mints exact tokens past 2^53 (decimal strings end to end)', async () => {
    prefix = uniquePrefix('coord');
    const a = coordinator();
    await admin.set(keysOf(a).counter, (2n ** 53n).toString());
    await a.start();
    expect(a.token()).toBe(2n ** 53n + 1n);
    await a.stop();
    await a.start();
    expect(a.token()).toBe(2n ** 53n + 2n);
  });

  it('survives SCRIPT FLUSH (scripts are reloaded on NOSCRIPT)', async () => {
    // On a private server: SCRIPT FLUSH empties the script cache of every client of a server, and
    // test files running beside this one on the shared Redis must not have theirs pulled away.
    const server = await startRedisServer();
    const own = createRedis(server.url);
    try {
      prefix = uniquePrefix('coord');
      const redis = createRedis(server.url);
      clients.push(redis);
      const a = coordinator({ redis });
      await a.start();
      const token = a.token()!;
      await own.script('FLUSH');
      // Renews after the flush must still work: wait until one has pushed the lease's expiry out
      // again. A lease's time left only ever goes up through a renew.
      let lowest = await own.pttl(keysOf(a).lease);
      await waitFor(async () => {
        const left = await own.pttl(keysOf(a).lease);
        lowest = Math.min(lowest, left);
        return left > lowest + 50;
      });
      expect(a.isLeader()).toBe(true);
      expect(a.token()).toBe(token);
      await a.stop();
    } finally {
      own.disconnect();
      await server.stop();
    }
  });

  it('keeps a node standby while Redis is unreachable, retrying, never believing it leads', async () => {
    prefix = uniquePrefix('coord');
    const dead = createRedis('redis://127.0.0.1:1', { maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: true });
    clients.push(dead);
    const events: FencedEvent[] = [];
    const a = coordinator({ redis: dead, acquireRetryMs: 100, logger: (e) => events.push(e) });
    await a.start();
    // Sample the belief on every poll until the node has retried at least twice.
    const sampler: boolean[] = [];
    await waitFor(() => {
      sampler.push(a.isLeader());
      return events.filter((e) => e.type === 'lease-store.error' && e.store === 'redis' && e.operation === 'acquire').length >= 2;
    });
    expect(sampler.every((l) => l === false)).toBe(true);
  });
});

describe('the two-call race', () => {
  // The design we started from: SET NX, then INCR, in two calls. An acquirer that pauses between them
  // past the TTL mints its token after a later election did, and ends up holding the higher token.
  async function naiveAcquire(redis: Redis, keys: { lease: string; counter: string }, node: string, pause: () => Promise<void>): Promise<bigint | null> {
    const ok = await redis.set(keys.lease, node, 'PX', 200, 'NX');
    if (ok !== 'OK') return null;
    await pause(); // GC pause, CPU throttling…
    return BigInt(await redis.incr(keys.counter));
  }

  it('lets a paused acquirer out-token the leader elected after it, with two calls', async () => {
    prefix = uniquePrefix('race');
    const keys = { lease: `${prefix}:lease`, counter: `${prefix}:token` };
    let b: bigint | null = null;
    // a wins the lease, then pauses between its two calls until its lease has expired and b has
    // been elected, both calls included.
    const a = await naiveAcquire(admin, keys, 'a', async () => {
      await waitFor(async () => (await admin.exists(keys.lease)) === 0);
      b = await naiveAcquire(admin, keys, 'b', async () => undefined);
    });
    expect(b).toBe(1n); // b is the current, later-elected leader…
    expect(a).toBe(2n); // …and a, elected before it, holds the higher token: the fence would lock b out
  });

  // The same race through the coordinator, with the fault where a split mint would land: right after
  // the acquire's reply comes back (the grant done), before the term is taken up. a stays stopped
  // there until its lease has expired in Redis and b has been elected and has written under its
  // token; then a goes on. The token a was minted with the grant, before b's: it is lower, a's term
  // is over by its deadline, and a fence b raised refuses a.
  for (const failpoint of ['lease.acquire-sent-before-reply', 'lease.acquired-before-dispatch'] as const) {
    it(`a fault at ${failpoint}: the grant and the mint are one step, so the earlier grant has the lower token and never leads after the later one`, async () => {
      prefix = uniquePrefix('race');
      const ttlMs = 300;
      const a = coordinator({ ttlMs, renewIntervalMs: 75, nodeId: 'a' });
      const b = coordinator({ ttlMs, renewIntervalMs: 75, nodeId: 'b' });
      const elected: Array<{ node: string; token: Token }> = [];
      for (const c of [a, b]) c.on('elected', ({ token }) => elected.push({ node: c.nodeId, token }));
      let bToken: Token | null = null;
      // What became of the action, for the failure message: the coordinator takes an error thrown at
      // the failpoint as a failed attempt and tries again, so it would not reach the test otherwise.
      let action = 'never ran';
      failpoints.arm(failpoint, {
        kind: 'call',
        run: async () => {
          action = 'ran';
          try {
            await waitFor(async () => (await admin.exists(keysOf(a).lease)) === 0, 5000, 5);
            await b.start();
            await waitFor(() => b.isLeader(), 5000, 5);
            bToken = b.token();
          } catch (error) {
            action = `failed: ${String(error)}`;
            throw error;
          }
        },
      });
      try {
        await a.start();
      } finally {
        failpoints.disarm();
      }
      const minted = BigInt((await admin.get(keysOf(a).counter))!);
      expect(bToken, `the failpoint's action ${action}`).not.toBeNull();
      // Two grants, two tokens, b's the last one minted: a's (granted first) was minted before it.
      expect(minted).toBe(bToken!);
      expect(bToken!).toBeGreaterThan(1n);
      expect(a.isLeader(), 'a still believes it leads after the later election').toBe(false);
      expect(elected.map((e) => e.node)).toEqual(['b']);
      // Whatever a acts with from now on carries a token below b's: the fence b set refuses it.
      const lease = String(await admin.get(keysOf(a).lease));
      expect(lease).toBe(`${bToken}:b`);
    });
  }

  it('cannot happen with the acquire script: election order is token order', async () => {
    prefix = uniquePrefix('race');
    // Many nodes race for short leases. A node only reports 'elected' while its lease is live, and a
    // lease is only granted after the previous one ended, so the order in which elections are
    // reported here is the order Redis granted them: tokens must rise strictly in it.
    const nodes = Array.from({ length: 6 }, () => coordinator({ ttlMs: 120, renewIntervalMs: 30, acquireRetryMs: 10 }));
    const grants: Token[] = [];
    for (const n of nodes) n.on('elected', ({ token }) => grants.push(token));
    await Promise.all(nodes.map((n) => n.start()));
    // Hand the lease on until every node has led once (a loaded machine elects more slowly, and a
    // fixed number of rounds sometimes ended one election short).
    const deadline = performance.now() + 30_000;
    const retired = new Set<Coordinator>();
    const live = () => leaders(nodes).filter((n) => !retired.has(n));
    for (let i = 0; grants.length < nodes.length && performance.now() < deadline; i++) {
      await waitFor(() => live().length > 0, 10_000, 2);
      const [leader] = live();
      retired.add(leader!);
      if (leader !== undefined) await (i % 2 === 0 ? leader.stop() : Promise.resolve(clients[nodes.indexOf(leader)]!.disconnect()));
    }
    expect(grants.length).toBeGreaterThan(5);
    for (let i = 1; i < grants.length; i++) expect(grants[i]!).toBeGreaterThan(grants[i - 1]!);
  });
});

describe('bad options', () => {
  // Shaped like an ioredis client, so only the option under test is wrong; never connected.
  const redis = { defineCommand() {}, duplicate() {} } as unknown as Redis;
  it.each([
    ['a redis that is not an ioredis client', { redis: { get() {} } }, 'redis'],
    ['a TTL not larger than the renew interval', { ttlMs: 1000, renewIntervalMs: 1000 }, 'renewIntervalMs'],
    ['renew + drift reaching the TTL', { ttlMs: 1000, renewIntervalMs: 990 }, 'renewIntervalMs'],
    ['a drift margin under 1% of the TTL', { ttlMs: 10_000, renewIntervalMs: 1000, driftMs: 50 }, 'driftMs'],
    ['a name with unsafe characters', { lease: 'bill ing}' }, 'lease'],
    ['an empty lease name', { lease: '' }, 'lease'],
    ['a fence without advance()', { fences: [{ highest: async () => null }] }, 'fences.0'],
  ])('%s is a ConfigError naming the option', (_label, extra, path) => {
    let caught: unknown;
    try {
      createCoordinator({ redis, lease: 'billing', ...extra } as CreateCoordinatorOptions);
    } catch (err) {
      caught = err;
    }
    expect(isFencedError(caught, 'INVALID_CONFIG')).toBe(true);
    expect((caught as { issues: { path: string }[] }).issues.map((i) => i.path)).toContain(path);
  });

  it('the class names no store: new Coordinator({ redis }) is a ConfigError naming store; createCoordinator({ redis }) makes the Redis store', () => {
    let caught: unknown;
    try {
      new Coordinator({ redis, lease: 'billing' });
    } catch (err) {
      caught = err;
    }
    expect(isFencedError(caught, 'INVALID_CONFIG')).toBe(true);
    expect((caught as { issues: { path: string }[] }).issues.map((i) => i.path)).toEqual(['store']);
    const real = createRedis();
    clients.push(real);
    expect(createCoordinator({ redis: real, lease: 'billing' }).store.kind).toBe('redis');
  });
});

describe('the record of elections', () => {
  it('each election is appended to the lease stream with its token, node, TTL and fence count, the last 32 kept', async () => {
    prefix = uniquePrefix('coord');
    const c = coordinator({ nodeId: 'node-x' });
    const tokens: Token[] = [];
    c.on('elected', ({ token }) => tokens.push(token));
    for (let i = 0; i < 34; i++) {
      await c.start();
      await waitFor(() => c.isLeader());
      await c.stop();
    }
    // Appended after the election without being awaited: wait for the last one.
    const newest = async () => ((await admin.xrevrange(keysOf(c).elections, '+', '-', 'COUNT', 1)) as Array<[string, string[]]>)[0];
    await waitFor(async () => (await newest())?.[1][1] === tokens.at(-1)!.toString());
    expect(await admin.xlen(keysOf(c).elections)).toBe(32);
    expect((await newest())![1]).toEqual(['token', tokens.at(-1)!.toString(), 'node', 'node-x', 'ttl', '600', 'fences', '0', 'regressed', '0']);
  });
});
