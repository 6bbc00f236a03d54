import { parseToken } from '@fenced/shared';
// Each layer against its own promise, at the exact moment that matters (failpoints), so that a bug
// the outer layers would absorb still fails a test here.
import { createCoordinator, type Coordinator } from '@fenced/coordinator';
import { createGuard } from '@fenced/consumer-guard';
import { createRedisGuard } from '@fenced/consumer-guard/redis';
import { failpoints } from '@fenced/shared/failpoints';
import { createRedis, createTestSchema, deleteKeys, uniquePrefix, waitFor } from '#test-support';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let redis: Redis;
const prefix = uniquePrefix('failpoints');

beforeAll(async () => {
  schema = await createTestSchema('failpoints');
  await schema.pool.query('CREATE TABLE effects (fire_id text PRIMARY KEY, token bigint NOT NULL)');
  redis = createRedis();
  await createGuard({ db: schema.pool, resource: 'setup', schema: schema.name }).migrate();
});
afterEach(() => failpoints.disarm());
afterAll(async () => {
  await deleteKeys(redis, prefix);
  redis.disconnect();
  await schema.drop();
});

let n = 0;
const envelope = (token: string) => ({ v: 1 as const, job: 'j', fireId: `j@${++n}`, scheduledAt: '2026-12-01T00:00:00.000Z', token, issuer: 'a', payload: null });

describe('the lease, at the moment its acquire reply arrives', () => {
  it('does not lead on a reply that arrives after its own deadline (a pause between the reply and the first dispatch)', async () => {
    const ttlMs = 400;
    let skewMs = 0;
    const c = createCoordinator({ redis, lease: 'late-reply', keyPrefix: prefix, ttlMs, renewIntervalMs: 100, acquireRetryMs: 50, clock: { now: () => performance.now() + skewMs } });
    const elected: bigint[] = [];
    c.on('elected', ({ token }) => elected.push(token));
    // The process "sleeps" right after the reply: by its own clock, the lease is over when it wakes.
    failpoints.arm('lease.acquired-before-dispatch', { kind: 'call', run: () => void (skewMs += ttlMs) });
    try {
      await c.start();
      await waitFor(() => elected.length > 0, 10_000);
      // Token 1 was minted for the late reply and handed back; leading started with the next one.
      expect(elected[0]).toBeGreaterThan(1n);
    } finally {
      await c.stop();
    }
  });
});

describe('the lease, while a reply is on its way', () => {
  // A clock that moves only when the test moves it: "the reply took 600 ms" is then exact, however
  // loaded the machine is. Real timers still drive the renewals.
  function manualClock() {
    let now = 1_000_000;
    return { now: () => now, advance: (ms: number) => void (now += ms), set: (at: number) => void (now = at) };
  }
  const coordinatorOn = (clock: ReturnType<typeof manualClock>) =>
    createCoordinator({ redis, lease: `slow-reply-${++n}`, keyPrefix: prefix, ttlMs: 1000, renewIntervalMs: 100, acquireRetryMs: 50, clock });
  /** Runs `c` until the test has read whether it leads at the deadline (`verdict()` set), and stops it. */
  async function leadingAtDeadline(c: Coordinator, verdict: () => boolean | undefined): Promise<boolean | undefined> {
    try {
      await c.start();
      await waitFor(() => verdict() !== undefined, 10_000);
      return verdict();
    } finally {
      await c.stop();
    }
  }

  it('counts an election from when the acquire was sent, not from its late reply', async () => {
    const clock = manualClock();
    const c = coordinatorOn(clock);
    const sentAt = clock.now();
    failpoints.arm('lease.acquire-sent-before-reply', { kind: 'call', run: () => clock.advance(600) });
    // At the first renewal, move to the deadline the acquire's send time allows: the term is over there.
    let leading: boolean | undefined;
    failpoints.arm('lease.renew-sent-before-reply', {
      kind: 'call',
      run: () => {
        clock.set(sentAt + c.ttlMs - c.driftMs);
        leading = c.isLeader();
      },
    });
    expect(await leadingAtDeadline(c, () => leading)).toBe(false);
  });

  it('counts a renewal from when the renew was sent, not from its late reply', async () => {
    const clock = manualClock();
    const c = coordinatorOn(clock);
    let firstSentAt = 0;
    let hits = 0;
    let leading: boolean | undefined;
    failpoints.arm(
      'lease.renew-sent-before-reply',
      {
        kind: 'call',
        run: () => {
          // The first renewal's reply takes 600 ms; at the second, move to the deadline the first
          // one's send time allows.
          if (++hits === 1) {
            firstSentAt = clock.now();
            clock.advance(600);
            return;
          }
          clock.set(firstSentAt + c.ttlMs - c.driftMs);
          leading = c.isLeader();
        },
      },
      2,
    );
    expect(await leadingAtDeadline(c, () => leading)).toBe(false);
  });
});

describe('the handler, between its pre-check and its write', () => {
  it('refuses the write when a newer term fenced the resource meanwhile, and applies nothing', async () => {
    const guard = createGuard({ db: schema.pool, redis, resource: `res-${++n}`, schema: schema.name, keyPrefix: prefix });
    const handle = guard.wrapHandler(
      async (_payload, ctx) =>
        ctx.guardedWrite(async (client: pg.PoolClient) => {
          await client.query('INSERT INTO effects (fire_id, token) VALUES ($1, $2)', [ctx.fireId, ctx.token.toString()]);
        }),
      { onStale: 'return' },
    );
    const e = envelope('5');
    // The pre-check passed with token 5; before the write starts, the next leader (token 6) fences.
    failpoints.arm('handler.prechecked-before-write', { kind: 'call', run: () => guard.fence(guard.resource).advance(parseToken(6n)) });
    expect(await handle(e)).toMatchObject({ status: 'stale', highest: 6n });
    expect((await schema.pool.query('SELECT 1 FROM effects WHERE fire_id = $1', [e.fireId])).rowCount).toBe(0);
  });
});

describe('the guard, inside the write and after it', () => {
  it('raises the Redis mark only after the commit: the mark is never ahead of a committed fence', async () => {
    const resource = `res-${++n}`;
    const guard = createGuard({ db: schema.pool, redis, resource, schema: schema.name, keyPrefix: prefix });
    const mark = createRedisGuard({ redis, resource, keyPrefix: prefix });
    await guard.fence(resource).advance(parseToken(3n));
    const seen: Array<{ at: string; mark: bigint | null; fence: bigint | null }> = [];
    const look = (at: string) => async () => {
      const fence = await schema.pool.query(`SELECT token::text AS token FROM "${schema.name}".fenced_fences WHERE resource = $1`, [resource]);
      seen.push({ at, mark: await mark.highest(), fence: fence.rows[0] === undefined ? null : BigInt(fence.rows[0].token) });
    };
    failpoints.arm('guard.checked-before-commit', { kind: 'call', run: look('checked, not committed') });
    failpoints.arm('guard.committed-before-mark', { kind: 'call', run: look('committed, mark not raised') });
    await guard.guardedWrite(7n, async (client: pg.PoolClient) => {
      await client.query('INSERT INTO effects (fire_id, token) VALUES ($1, 7)', [`j@${++n}`]);
    });
    // Before the commit, another session still sees fence 3 and the mark has not moved; after it, the
    // fence is 7 and the mark follows (raised last).
    expect(seen).toEqual([
      { at: 'checked, not committed', mark: 3n, fence: 3n },
      { at: 'committed, mark not raised', mark: 3n, fence: 7n },
    ]);
    expect(await mark.highest()).toBe(7n);
  });
});
