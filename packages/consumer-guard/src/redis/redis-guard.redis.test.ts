import { startRedisServer } from '@fenced/chaos';
import { isFencedError, parseToken } from '@fenced/shared';
import { createRedis, deleteKeys, uniquePrefix, waitFor } from '#test-support';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisGuard } from './index.js';

let redis: Redis;
const prefix = uniquePrefix('rguard');
beforeAll(() => {
  redis = createRedis();
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  redis.disconnect();
});

let n = 0;
const guard = () => createRedisGuard({ redis, resource: `r-${++n}`, keyPrefix: prefix });
const stale = (p: Promise<unknown>) => p.then(() => 'accepted', (e: unknown) => (isFencedError(e, 'STALE_TOKEN') ? 'stale' : String(e)));

describe('createRedisGuard', () => {
  it('check accepts equal and higher tokens and refuses lower ones, without moving the mark', async () => {
    const g = guard();
    expect(await stale(g.check(5n))).toBe('accepted'); // no mark yet
    expect(await g.highest()).toBeNull();
    await g.raise(5n);
    expect(await stale(g.check(5n))).toBe('accepted');
    expect(await stale(g.check(6n))).toBe('accepted');
    expect(await stale(g.check(4n))).toBe('stale');
    expect(await g.highest()).toBe(5n);
  });

  it('raise never lowers the mark', async () => {
    const g = guard();
    expect(await g.raise(10n)).toBe(10n);
    expect(await g.raise(3n)).toBe(10n);
    expect(await g.highest()).toBe(10n);
  });

  it('every script that compares tokens compares them exactly where doubles cannot (2^53 and 2^53 + 1 are one double)', async () => {
    // raise-to: 2^53 + 1 is above a mark of 2^53, though as doubles the two are equal.
    const raised = guard();
    await raised.raise(2n ** 53n);
    expect(await raised.raise(2n ** 53n + 1n)).toBe(2n ** 53n + 1n);
    expect(await raised.highest()).toBe(2n ** 53n + 1n);
    // guarded-write: refuses 2^53 under a mark of 2^53 + 1, and raises to 2^53 + 2 exactly.
    const written = guard();
    await written.raise(2n ** 53n + 1n);
    expect(await stale(written.guardedWrite(2n ** 53n, [{ command: 'SET', keys: [written.key('v')], args: ['stale'] }]))).toBe('stale');
    expect(await redis.get(written.key('v'))).toBeNull();
    expect(await stale(written.guardedWrite(2n ** 53n + 2n, [{ command: 'SET', keys: [written.key('v')], args: ['new'] }]))).toBe('accepted');
    expect(await written.highest()).toBe(2n ** 53n + 2n);
    expect(await redis.get(written.key('v'))).toBe('new');
  });

  it('compares exactly past 2^53 (decimal strings, never Lua doubles)', async () => {
    const g = guard();
    await g.raise(2n ** 53n + 1n);
    expect(await stale(g.check(2n ** 53n))).toBe('stale'); // as doubles these two are equal
    expect(await stale(g.check(2n ** 53n + 1n))).toBe('accepted');
    await g.raise(2n ** 63n - 1n);
    expect(await g.highest()).toBe(2n ** 63n - 1n);
    expect(await stale(g.check(2n ** 63n - 2n))).toBe('stale');
    // Length first: "10" is above "9" although "1" < "9".
    const h = guard();
    await h.raise(9n);
    expect(await stale(h.check(10n))).toBe('accepted');
  });

  it('guardedWrite compares, raises and applies in one script; a stale one applies nothing', async () => {
    const g = guard();
    const invoice = g.key('invoice:1');
    const counter = g.key('count');
    const results = await g.guardedWrite(7n, [
      { command: 'HSET', keys: [invoice], args: ['status', 'sent'] },
      { command: 'INCRBY', keys: [counter], args: [2] },
    ]);
    expect(results).toEqual([1, 2]);
    expect(await g.highest()).toBe(7n);
    expect(await stale(g.guardedWrite(6n, [{ command: 'HSET', keys: [invoice], args: ['status', 'void'] }]))).toBe('stale');
    expect(await redis.hget(invoice, 'status')).toBe('sent');
    expect(await redis.get(counter)).toBe('2');
    // The term's own next write carries the mark's token: equal is not stale (found by pnpm mutate:
    // the comparison made `<=` survived every test before this one).
    expect(await g.guardedWrite(7n, [{ command: 'INCRBY', keys: [counter], args: [1] }])).toEqual([3]);
    expect(await g.highest()).toBe(7n);
  });

  it('compares tokens as numbers, not text: token 9 is stale under a mark of 10 (found by pnpm mutants)', async () => {
    const g = guard();
    const invoice = g.key('invoice:9');
    await g.raise(10n);
    expect(await stale(g.guardedWrite(9n, [{ command: 'SET', keys: [invoice], args: ['void'] }]))).toBe('stale');
    expect(await redis.exists(invoice)).toBe(0);
    expect(await g.highest()).toBe(10n);
  });

  it('refuses commands that do not belong in a fenced mutation, and bad tokens, before Redis', async () => {
    const g = guard();
    const refused = (reason: string) => (e: unknown) => isFencedError(e, 'INVALID_MUTATION') && e.reason === reason;
    await expect(g.guardedWrite(1n, [{ command: 'FLUSHALL', keys: [] }])).rejects.toSatisfy(refused('forbidden-command'));
    await expect(g.guardedWrite(1n, [{ command: 'SET x', keys: [g.key('a')] }])).rejects.toSatisfy(refused('forbidden-command'));
    await expect(g.guardedWrite(1n, [{ command: 'SET', keys: [''], args: ['v'] }])).rejects.toSatisfy(refused('bad-key'));
    // A single server runs a script over keys of any slot: only Cluster refuses them.
    expect(await g.guardedWrite(1n, [{ command: 'SET', keys: [`${prefix}:free-key`], args: ['v'] }])).toEqual(['OK']);
    expect(await g.highest()).toBe(1n);
    await redis.del(`${prefix}:free-key`);
  });

  it('bad tokens are refused before Redis', async () => {
    const g = guard();
    await expect(g.check('abc')).rejects.toSatisfy((e: unknown) => isFencedError(e, 'INVALID_TOKEN'));
    expect(await g.highest()).toBeNull();
  });
});

describe('the record of refused writes', () => {
  it('a refused guarded write is appended to the resource stream, in the mark slot, newest last, trimmed to the last 100', async () => {
    const g = guard();
    await g.raise(200n);
    for (let i = 1; i <= 105; i++) await expect(g.guardedWrite(BigInt(i), [{ command: 'SET', keys: [g.key('a')], args: ['x'] }])).rejects.toThrow();
    // Appended after the refusal is thrown, without being awaited: wait for the last one.
    const newest = async () => ((await redis.xrevrange(g.refusalsKey, '+', '-', 'COUNT', 1)) as Array<[string, string[]]>)[0]?.[1];
    await waitFor(async () => (await newest())?.[3] === '105');
    expect(await redis.xlen(g.refusalsKey)).toBe(100);
    const fields = await newest();
    expect(fields).toEqual(['resource', g.resource, 'token', '105', 'highest', '200', 'via', 'redis', 'fire', '']);
    // One hash tag, so one Cluster slot.
    const tag = (key: string) => /\{[^}]*\}/.exec(key)?.[0];
    expect(tag(g.refusalsKey)).toBe(tag(g.markKey));
    expect(tag(g.markKey)).toBeDefined();
  });

  it('a refusal made just before the client quits reaches the stream when the guard is flushed first', async () => {
    // Found by a new user: 1 of 3 refusals shown by fenced status, the last one made right before
    // redis.quit() (it is recorded a turn of the event loop after it is returned).
    const own = createRedis();
    const g = createRedisGuard({ redis: own, resource: `r-${++n}`, keyPrefix: prefix });
    await g.raise(9n);
    await expect(g.guardedWrite(3n, [{ command: 'SET', keys: [g.key('a')], args: ['x'] }])).rejects.toThrow();
    await g.flush();
    await own.quit();
    expect(await redis.xlen(g.refusalsKey)).toBe(1);
  });

  it('the stream lives outside the namespace of guard.key(), so no user key can collide with it', () => {
    const g = guard();
    expect(g.refusalsKey.startsWith(`${prefix}:guard-refusals:{`)).toBe(true);
    expect(g.key('refusals')).not.toBe(g.refusalsKey);
    expect(g.key(':refusals')).not.toBe(g.refusalsKey);
  });

  it('check reads and records nothing; recordRefusal records a decision made elsewhere with its fire id', async () => {
    const g = guard();
    await g.raise(9n);
    await expect(g.check(3n)).rejects.toThrow();
    expect(await redis.xlen(g.refusalsKey)).toBe(0);
    g.recordRefusal(parseToken(4n), parseToken(9n), 'postgres', 'invoices@20261201T100000.000Z');
    await waitFor(async () => (await redis.xlen(g.refusalsKey)) === 1);
    const [[, fields]] = (await redis.xrange(g.refusalsKey, '-', '+')) as [[string, string[]]];
    expect(fields).toEqual(['resource', g.resource, 'token', '4', 'highest', '9', 'via', 'postgres', 'fire', 'invoices@20261201T100000.000Z']);
  });

  it('records the refusals of one turn of the event loop in one call, oldest first, and of a storm the newest 100', async () => {
    // On a private server: MONITOR on the shared Redis receives every other test file's commands,
    // and under load one of them can arrive before ioredis has switched the connection into monitor
    // mode (its "Command queue state error", an unhandled error that fails the run). Here the only
    // traffic is this test's, and it starts once the monitor is in place.
    const server = await startRedisServer();
    const own = createRedis(server.url);
    const monitored = createRedis(server.url);
    try {
      const g = createRedisGuard({ redis: own, resource: `r-${++n}`, keyPrefix: prefix });
      // The server's own account of the script calls made on this stream (their inner commands excluded).
      const monitor = await monitored.monitor();
      const calls: string[][] = [];
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (!source.includes('lua') && /^eval/i.test(args[0] ?? '') && args.includes(g.refusalsKey)) calls.push(args);
      });
      try {
        for (let i = 1; i <= 250; i++) g.recordRefusal(parseToken(i), parseToken(300n), 'redis', `job@20261201T1000${String(i % 60).padStart(2, '0')}.000Z`);
        await waitFor(async () => (await own.xlen(g.refusalsKey)) === 100);
        await waitFor(() => calls.length > 0);
      } finally {
        monitor.disconnect();
      }
      const entries = (await own.xrange(g.refusalsKey, '-', '+')) as Array<[string, string[]]>;
      expect(entries.map(([, fields]) => fields[3])).toEqual(Array.from({ length: 100 }, (_, i) => String(151 + i)));
      expect(calls).toHaveLength(1);
    } finally {
      own.disconnect();
      monitored.disconnect();
      await server.stop();
    }
  });

  it('the record script refuses arguments that are not whole quadruples, appending nothing', async () => {
    const g = guard();
    const raw = (...args: string[]) => (redis as unknown as Record<string, (...a: string[]) => Promise<unknown>>)['record-refusals_fenced1']!(...args);
    await expect(raw(g.refusalsKey, g.resource, '100', '4', '9', 'redis')).rejects.toThrow(/record-refusals: expected/);
    await expect(raw(g.refusalsKey, g.resource)).rejects.toThrow(/record-refusals: expected/);
    // No quadruple at all is a whole batch of none: nothing appended, no error (found by pnpm mutate).
    expect(await raw(g.refusalsKey, g.resource, '100')).toBe(0);
    expect(await redis.xlen(g.refusalsKey)).toBe(0);
  });
});
