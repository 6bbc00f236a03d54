import { redisCommand, startRedisSentinel, startRedisServer, type RedisSentinel } from '@fenced/chaos';
import { createGuard } from '@fenced/consumer-guard';
import { createRedisGuard } from '@fenced/consumer-guard/redis';
import { createCoordinator, leaseKeys, redisLeases, type Coordinator } from '@fenced/coordinator';
import { isFencedError, type FencedEvent } from '@fenced/shared';
import { caught, uniquePrefix, waitFor } from '#test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// A real Sentinel deployment (a primary, two replicas, three sentinels, down-after 1000 ms) started
// for this file.
let sentinel: RedisSentinel;
const clients: Redis[] = [];

beforeAll(async () => {
  sentinel = await startRedisSentinel({ downAfterMs: 1000 });
}, 120_000);
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await sentinel?.stop();
});

function sentinelClient(failoverDetector: boolean): Redis {
  const client = new Redis({ sentinels: [...sentinel.sentinelNodes], name: sentinel.name, failoverDetector, maxRetriesPerRequest: 1, lazyConnect: !failoverDetector });
  client.on('error', () => {});
  clients.push(client);
  return client;
}

describe('Sentinel clients', () => {
  it('without failoverDetector are refused by every factory, naming the option, before anything connects', () => {
    const redis = sentinelClient(false);
    const attempts = [
      () => createCoordinator({ redis, lease: 'sentinel' }),
      () => createRedisGuard({ redis, resource: 'r' }),
      () => createGuard({ db: { query: async () => ({ rows: [] }) } as never, redis, resource: 'r' }),
    ];
    for (const attempt of attempts) {
      let caught: unknown;
      try {
        attempt();
      } catch (error) {
        caught = error;
      }
      expect(isFencedError(caught, 'INVALID_CONFIG') && caught.issues.some((i) => i.path === 'redis' && /failoverDetector/.test(i.message))).toBe(true);
    }
    expect(redis.status).toBe('wait'); // lazyConnect, never connected
  });
});

describe('the coordinator on a server the sentinels do not name', () => {
  // A client left on a deposed primary that still takes writes: here a standalone server that ioredis
  // reaches through natMap when the sentinels name the real primary. Winning the lease there must
  // not make a leader: the election is confirmed with the sentinels, who name another server.
  it('wins the lease there but never leads, and hands it back', async () => {
    const rogue = await startRedisServer();
    const primary = await sentinel.primary();
    const redis = new Redis({
      sentinels: [...sentinel.sentinelNodes],
      name: sentinel.name,
      failoverDetector: true,
      maxRetriesPerRequest: 1,
      natMap: { [`127.0.0.1:${primary.port}`]: { host: '127.0.0.1', port: rogue.port } },
    });
    redis.on('error', () => {});
    clients.push(redis);
    const refused: FencedEvent[] = [];
    const c = createCoordinator({
      redis,
      lease: 'rogue',
      keyPrefix: uniquePrefix('rogue'),
      ttlMs: 2000,
      renewIntervalMs: 400,
      acquireRetryMs: 100,
      logger: (e) => void (e.type === 'lease-store.error' && e.store === 'redis' && e.operation === 'acquire' && refused.push(e)),
    });
    const elected: bigint[] = [];
    c.on('elected', ({ token }) => elected.push(token));
    try {
      await c.start();
      expect(redis.stream?.remotePort).toBe(rogue.port);
      await waitFor(() => refused.length >= 3 || elected.length > 0, 20_000);
      expect(elected).toEqual([]);
      expect(String((refused[0] as { error: unknown }).error)).toMatch(/not the primary every sentinel names/);
    } finally {
      await c.stop();
      redis.disconnect();
      await rogue.stop();
    }
  });
});

describe("the lease store's renew on a Sentinel client", () => {
  // A renew counts only when the sentinels name the server that answered it: the same rogue server
  // as above, holding a copy of the lease (as a deposed primary that took the write before the
  // failover would), answers a renew that must not extend the term.
  it('counts a renew the named primary answered, refuses one a server the sentinels do not name answered (naming it), and is not renewed where that server holds no such lease', async () => {
    const rogue = await startRedisServer();
    const primary = await sentinel.primary();
    const onPrimary = sentinelClient(true);
    const onRogue = new Redis({ sentinels: [...sentinel.sentinelNodes], name: sentinel.name, failoverDetector: true, maxRetriesPerRequest: 1, natMap: { [`127.0.0.1:${primary.port}`]: { host: '127.0.0.1', port: rogue.port } } });
    onRogue.on('error', () => {});
    clients.push(onRogue);
    const prefix = uniquePrefix('sent-renew');
    const store = (client: Redis) => redisLeases(client, { keyPrefix: prefix }).openLease('renew', 'n1', 5000);
    try {
      const won = await store(onPrimary).acquire(10_000, 5000);
      if (!won.won) throw new Error('not granted');
      expect(await won.confirmServer()).toBeNull();
      expect(await store(onPrimary).renew(won.leaseValue, 10_000, () => 5000)).toMatchObject({ renewed: true });

      const rogueOnly = await store(onRogue).renew(won.leaseValue, 10_000, () => 5000);
      expect(rogueOnly, 'the rogue server holds no lease: not renewed, without asking the sentinels').toMatchObject({ renewed: false });
      await redisCommand(rogue.port, ['SET', leaseKeys(prefix, 'renew').lease, won.leaseValue, 'PX', '10000'], 1000);
      const refused = await caught(store(onRogue).renew(won.leaseValue, 10_000, () => 5000));
      expect(String(refused)).toContain(`the reply came from 127.0.0.1:${rogue.port}, not the primary every sentinel names`);
      // Typed, and naming the server for whoever reads the lease store's errors (the simulation does).
      expect(refused).toMatchObject({ name: 'NotOnPrimaryError', server: `127.0.0.1:${rogue.port}` });
    } finally {
      onRogue.disconnect();
      await rogue.stop();
    }
  });

  it('a renew whose confirmation outlasts the renew’s time fails naming the confirmation (every sentinel frozen)', async () => {
    const store = redisLeases(sentinelClient(true), { keyPrefix: uniquePrefix('sent-confirm') }).openLease('confirm', 'n1', 5000);
    const won = await store.acquire(10_000, 5000);
    if (!won.won) throw new Error('not granted');
    expect(await won.confirmServer()).toBeNull();
    for (const s of sentinel.sentinels) s.pause();
    try {
      expect(await caught(store.renew(won.leaseValue, 10_000, () => 300))).toMatchObject({ name: 'TimeoutError', message: 'confirm primary timed out after 300 ms' });
    } finally {
      for (const s of sentinel.sentinels) s.resume();
    }
  });
});

/** One belief interval of one coordinator, on this process's monotonic clock. */
interface Belief {
  readonly node: string;
  readonly token: bigint;
  readonly from: number;
  until: number;
  /** The server its command connection was on when it was elected. */
  readonly port: number | undefined;
}

describe('the coordinator when the Sentinel primary freezes (SIGSTOP past down-after, then SIGCONT)', () => {
  it('elects no leader on the deposed primary, beliefs never overlap beyond the drift margin, and a leader exists on the new primary within TTL + one renew interval', async () => {
    const TTL = 2000;
    const RENEW = 400;
    const prefix = uniquePrefix('sent');
    const beliefs: Belief[] = [];
    const coordinators: Coordinator[] = [];
    for (let i = 0; i < 3; i++) {
      const redis = sentinelClient(true);
      const c = createCoordinator({ redis, lease: 'frozen', keyPrefix: prefix, ttlMs: TTL, renewIntervalMs: RENEW, acquireRetryMs: RENEW, nodeId: `n${i}` });
      c.on('elected', ({ token }) => beliefs.push({ node: c.nodeId, token, from: performance.now(), until: Number.POSITIVE_INFINITY, port: redis.stream?.remotePort }));
      // A belief ends when the term did (for a lapsed lease, at its deadline), not when a late timer
      // delivers the event.
      c.on('lost', ({ endedAt }) => {
        const open = [...beliefs].reverse().find((b) => b.node === c.nodeId);
        if (open !== undefined && open.until === Number.POSITIVE_INFINITY) open.until = endedAt;
      });
      coordinators.push(c);
    }
    // When the sentinels announce the new primary.
    let switchedAt = Number.NaN;
    const watcher = new Redis({ ...sentinel.sentinelNodes[0]!, lazyConnect: true });
    watcher.on('error', () => {});
    clients.push(watcher);
    await watcher.subscribe('+switch-master');
    watcher.on('message', () => {
      if (Number.isNaN(switchedAt)) switchedAt = performance.now();
    });

    try {
      await Promise.all(coordinators.map((c) => c.start()));
      await waitFor(() => coordinators.some((c) => c.isLeader()), 10_000);

      const deposed = await sentinel.primary();
      deposed.pause();
      const promoted = await sentinel.waitForFailover(deposed, 60_000);
      await waitFor(() => !Number.isNaN(switchedAt), 10_000);
      // The deposed primary comes back believing it still is one, until the sentinels turn it into a
      // replica: the window in which a client that stayed on it would elect leaders there.
      deposed.resume();
      await waitFor(async () => /role:slave/.test(String(await redisCommand(deposed.port, ['INFO', 'replication'], 1000).catch(() => ''))), 30_000, 100);
      await waitFor(() => coordinators.some((c) => c.isLeader()), 10_000);

      const afterSwitch = beliefs.filter((b) => b.from > switchedAt);
      expect(afterSwitch.filter((b) => b.port === deposed.port), 'elected on the deposed primary').toEqual([]);
      expect(afterSwitch.every((b) => b.port === promoted.port)).toBe(true);

      const drift = coordinators[0]!.driftMs;
      for (const a of beliefs) {
        for (const b of beliefs) {
          if (a === b || a.node === b.node) continue;
          const overlap = Math.min(a.until, b.until) - Math.max(a.from, b.from);
          expect(overlap, `${a.node} (token ${a.token}) and ${b.node} (token ${b.token}) both believed they led`).toBeLessThanOrEqual(drift);
        }
      }
      const deadline = switchedAt + TTL + RENEW;
      const ledInTime = beliefs.some((b) => b.from <= deadline && b.until > switchedAt);
      expect(ledInTime, `no leader ${TTL + RENEW} ms after the switch; beliefs: ${beliefs.map((b) => `${b.node}/${b.token} ${Math.round(b.from - switchedAt)}..${Math.round(b.until - switchedAt)}`).join(', ')}`).toBe(true);
    } finally {
      await Promise.all(coordinators.map((c) => c.stop()));
    }
  });
});
