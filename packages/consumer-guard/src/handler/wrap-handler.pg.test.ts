import { freePort, startRedisServer } from '@fenced/chaos';
import pgModule from 'pg';
import { isFencedError, signEnvelope, type Envelope, type FencedEvent } from '@fenced/shared';
import { countingPool, createRedis, createTestSchema, deleteKeys, uniquePrefix } from '#test-support';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGuard, type HandlerContext } from '../index.js';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let redis: Redis;
const prefix = uniquePrefix('handler');
const PgPool = pgModule.Pool;
const SECRET = 'k'.repeat(40);
const OTHER_SECRET = 'o'.repeat(40);

beforeAll(async () => {
  schema = await createTestSchema('handler');
  await schema.pool.query(`CREATE TABLE ledger (id serial PRIMARY KEY, resource text NOT NULL, fire_id text NOT NULL, token bigint NOT NULL, amount int NOT NULL)`);
  redis = createRedis();
  await createGuard({ db: schema.pool, resource: 'setup', schema: schema.name }).migrate();
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  redis.disconnect();
  await schema.drop();
});

let n = 0;
function envelope(overrides: Partial<Envelope> = {}): Envelope {
  n++;
  return {
    v: 1,
    job: 'invoices',
    fireId: `invoices@fire-${n}`,
    scheduledAt: '2026-11-29T10:00:00.000Z',
    token: '5',
    issuer: 'node-a',
    payload: { amount: 100 },
    ...overrides,
  };
}

const insertLedger = (resource: string) => async (payload: unknown, ctx: HandlerContext<pg.PoolClient>) =>
  ctx.guardedWrite(async (client) => {
    await client.query(`INSERT INTO ledger (resource, fire_id, token, amount) VALUES ($1, $2, $3, $4)`, [
      resource,
      ctx.fireId,
      ctx.token.toString(),
      (payload as { amount: number }).amount,
    ]);
    return 'written';
  });

const ledgerRows = async (resource: string) =>
  (await schema.pool.query(`SELECT fire_id, token::text AS token FROM ledger WHERE resource = $1 ORDER BY id`, [resource])).rows;

function setup(extra: { keys?: Record<string, string>; logger?: (e: FencedEvent) => void; redis?: Redis | null; db?: pg.Pool } = {}) {
  const resource = `res-${++n}`;
  const guard = createGuard({
    db: extra.db ?? schema.pool,
    ...(extra.redis === null ? {} : { redis: extra.redis ?? redis }),
    resource,
    schema: schema.name,
    keyPrefix: prefix,
    ...(extra.keys ? { keys: extra.keys } : {}),
    ...(extra.logger ? { logger: extra.logger } : {}),
  });
  return { guard, resource, handle: guard.wrapHandler(insertLedger(resource)), handleQuietly: guard.wrapHandler(insertLedger(resource), { onStale: 'return' }) };
}

describe('wrapHandler', () => {
  it('applies a fire once: a replayed fireId changes the database once and reports duplicate', async () => {
    const { handle, resource } = setup();
    const e = envelope();
    expect(await handle(e)).toMatchObject({ status: 'applied', result: 'written', fireId: e.fireId, token: 5n });
    expect(await handle(e)).toEqual({ status: 'duplicate', fireId: e.fireId, token: 5n });
    expect(await handle(structuredClone(e))).toMatchObject({ status: 'duplicate' });
    expect(await ledgerRows(resource)).toEqual([{ fire_id: e.fireId, token: '5' }]);
  });

  it('applies concurrent duplicates once', async () => {
    const { handle, resource } = setup();
    const e = envelope();
    const outcomes = await Promise.all(Array.from({ length: 12 }, () => handle(structuredClone(e))));
    expect(outcomes.filter((o) => o.status === 'applied')).toHaveLength(1);
    expect(outcomes.filter((o) => o.status === 'duplicate')).toHaveLength(11);
    expect(await ledgerRows(resource)).toHaveLength(1);
  });

  it('applies a fire whose write rolled back on its next delivery: a failed attempt claims nothing', async () => {
    const { guard, resource } = setup();
    let attempts = 0;
    const handle = guard.wrapHandler<string>((_payload, ctx) =>
      ctx.guardedWrite(async (client: pg.PoolClient) => {
        await client.query(`INSERT INTO ledger (resource, fire_id, token, amount) VALUES ($1, $2, $3, 1)`, [resource, ctx.fireId, ctx.token.toString()]);
        if (++attempts === 1) throw new Error('the first delivery fails after its insert');
        return 'written';
      }),
    );
    const e = envelope();
    await expect(handle(e)).rejects.toThrow('the first delivery fails after its insert');
    expect(await ledgerRows(resource)).toEqual([]);
    expect(await handle(structuredClone(e))).toMatchObject({ status: 'applied' });
    expect(await ledgerRows(resource)).toEqual([{ fire_id: e.fireId, token: '5' }]);
  });

  it('asks Redis once per fire in steady state: the pre-check, not again before the write', async () => {
    const counted = createRedis();
    let commands = 0;
    const send = counted.sendCommand.bind(counted);
    counted.sendCommand = ((...args: Parameters<typeof send>) => (commands++, send(...args))) as typeof counted.sendCommand;
    const { handle } = setup({ redis: counted });
    await handle(envelope()); // the first fire raises the mark; from then on it is known
    commands = 0;
    for (let i = 0; i < 5; i++) expect(await handle(envelope())).toMatchObject({ status: 'applied' });
    expect(commands).toBe(5);
    counted.disconnect();
  });

  it('refuses a stale envelope on Redis without a single PostgreSQL query', async () => {
    const counting = countingPool(schema.pool);
    const { guard, resource } = setup({ db: counting.pool });
    const handle = guard.wrapHandler(insertLedger(resource), { onStale: 'return' });
    await handle(envelope({ token: '9' }));
    const before = { ...counting.counts };
    let ran = false;
    const staleHandle = guard.wrapHandler(async () => void (ran = true), { onStale: 'return' });
    expect(await staleHandle(envelope({ token: '8' }))).toMatchObject({ status: 'stale', token: 8n, highest: 9n });
    expect(ran).toBe(false);
    expect(counting.counts).toEqual(before);
    // The same refusal through PostgreSQL alone does reach the database.
    const pgOnly = createGuard({ db: counting.pool, resource, schema: schema.name });
    await expect(pgOnly.wrapHandler(insertLedger(resource))(envelope({ token: '8' }))).rejects.toSatisfy((e: unknown) => isFencedError(e, 'STALE_TOKEN'));
    expect(counting.counts.queries).toBeGreaterThan(before.queries);
  });

  it('throws StaleTokenError by default, and the Redis mark follows PostgreSQL', async () => {
    const { guard, handle, resource } = setup();
    await handle(envelope({ token: '20' }));
    expect(await guard.store.highest()).toBe(20n);
    await expect(handle(envelope({ token: '19' }))).rejects.toSatisfy((e: unknown) => isFencedError(e, 'STALE_TOKEN'));
    expect(await ledgerRows(resource)).toHaveLength(1);
  });

  it('rebuilds a lost Redis mark from PostgreSQL, never trusting it lower', async () => {
    const { guard, handle, resource } = setup();
    await handle(envelope({ token: '30' }));
    await deleteKeys(redis, prefix); // Redis lost its data
    // Redis knows nothing, so PostgreSQL decides, refuses, and teaches Redis the fence again.
    await expect(handle(envelope({ token: '29' }))).rejects.toSatisfy((e: unknown) => isFencedError(e, 'STALE_TOKEN'));
    const counting = countingPool(schema.pool);
    const fastGuard = createGuard({ db: counting.pool, redis, resource, schema: schema.name, keyPrefix: prefix });
    await expect(fastGuard.wrapHandler(insertLedger(resource))(envelope({ token: '29' }))).rejects.toSatisfy((e: unknown) =>
      isFencedError(e, 'STALE_TOKEN'),
    );
    expect(counting.counts.queries).toBe(0); // the rebuilt mark refused it on the fast path
    expect(await ledgerRows(resource)).toHaveLength(1);
    expect(await guard.highest()).toBe(30n);
  });

  it('hands the handler its token, fire id and a stable idempotency key', async () => {
    const { guard } = setup();
    const seen: HandlerContext<pg.PoolClient>[] = [];
    const handle = guard.wrapHandler(async (_payload, ctx) => void seen.push(ctx));
    const e = envelope({ token: '12' });
    await handle(e);
    await handle(e);
    expect(seen[0]!.token).toBe(12n);
    expect(seen[0]!.fireId).toBe(e.fireId);
    expect(seen[0]!.idempotencyKey).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(seen[1]!.idempotencyKey).toBe(seen[0]!.idempotencyKey);
    expect(seen[0]!.signal.aborted).toBe(false);
  });

  describe('malformed envelopes get a validation error naming the field, and nothing is written', () => {
    const big = 'x'.repeat(1024 * 1024);
    it.each([
      ['missing fireId', (e: Envelope) => ({ ...e, fireId: undefined }), 'fireId'],
      ['token as a number', (e: Envelope) => ({ ...e, token: 5 }), 'token'],
      ['token "abc"', (e: Envelope) => ({ ...e, token: 'abc' }), 'token'],
      ['token -1', (e: Envelope) => ({ ...e, token: '-1' }), 'token'],
      ['token 0', (e: Envelope) => ({ ...e, token: '0' }), 'token'],
      ['token 2^64', (e: Envelope) => ({ ...e, token: '18446744073709551616' }), 'token'],
      ['scheduledAt a number', (e: Envelope) => ({ ...e, scheduledAt: 1 }), 'scheduledAt'],
      ['a 1 MB payload', (e: Envelope) => ({ ...e, payload: { big } }), 'payload'],
      ['an extra field', (e: Envelope) => ({ ...e, priority: 1 }), ''],
      ['a fireId with NUL', (e: Envelope) => ({ ...e, fireId: `${e.fireId}\u0000` }), 'fireId'],
      ['a fireId with a lone surrogate', (e: Envelope) => ({ ...e, fireId: `${e.fireId}\uD800` }), 'fireId'],
      ['a payload getter that throws', (e: Envelope) => Object.defineProperty({ ...e, payload: undefined }, 'payload', { get: () => { throw new Error('boom'); }, enumerable: true }), 'payload'],
    ])('%s', async (_label, mutate, path) => {
      const { handle, resource, guard } = setup();
      let caught: unknown;
      await handle(mutate(envelope())).catch((err: unknown) => (caught = err));
      expect(isFencedError(caught, 'INVALID_ENVELOPE')).toBe(true);
      expect((caught as { issues: { path: string }[] }).issues.map((i) => i.path)).toContain(path);
      expect(await ledgerRows(resource)).toEqual([]);
      expect(await guard.highest()).toBeNull();
    });
  });
});

describe('fire ids the database cannot hold', () => {
  it('are refused before the handler starts, so no effect outside the database happens either', async () => {
    const { guard, resource } = setup();
    const started: string[] = [];
    const handle = guard.wrapHandler(async (_payload, ctx) => {
      started.push(ctx.fireId); // an email would go out here
      return ctx.guardedWrite(async (client) => client.query(`INSERT INTO ledger (resource, fire_id, token, amount) VALUES ($1, $2, 5, 1)`, [resource, ctx.fireId]));
    });
    // Two distinct fires that PostgreSQL would store as the same text: neither may be taken for the other.
    for (const fireId of ['a\uD800', 'a\uD801', 'a\u0000b']) {
      let caught: unknown;
      await handle(envelope({ fireId })).catch((err: unknown) => (caught = err));
      expect(isFencedError(caught, 'INVALID_ENVELOPE'), JSON.stringify(fireId)).toBe(true);
    }
    expect(started).toEqual([]);
    expect(await ledgerRows(resource)).toEqual([]);
  });
});

describe('signed envelopes', () => {
  const keys = { '2026-11': SECRET };
  const sign = (e: Envelope, secret = SECRET, kid = '2026-11') => signEnvelope(e, { kid, secret });

  it('accepts a genuine envelope', async () => {
    const { handle } = setup({ keys });
    expect(await handle(sign(envelope()))).toMatchObject({ status: 'applied' });
  });

  it.each([
    ['unsigned', (e: Envelope) => e],
    ['signed with a wrong key', (e: Envelope) => sign(e, OTHER_SECRET)],
    ['signed with an unknown key id', (e: Envelope) => sign(e, SECRET, 'old')],
    ['forged: token raised to 2^63-1 after signing', (e: Envelope) => ({ ...sign(e), token: '9223372036854775807' })],
    ['tampered: fireId changed after signing', (e: Envelope) => ({ ...sign(e), fireId: 'invoices@other' })],
    ['tampered: payload changed after signing', (e: Envelope) => ({ ...sign(e), payload: { amount: 1_000_000 } })],
    ['a garbage signature', (e: Envelope) => ({ ...sign(e), sig: 'A'.repeat(43) })],
  ])('refuses one %s and leaves no trace', async (_label, forge) => {
    const events: FencedEvent[] = [];
    const { handle, resource, guard } = setup({ keys, logger: (e) => events.push(e) });
    const before = await guard.highest();
    let caught: unknown;
    await handle(forge(envelope())).catch((err: unknown) => (caught = err));
    expect(isFencedError(caught, 'BAD_SIGNATURE')).toBe(true);
    expect(await ledgerRows(resource)).toEqual([]);
    expect(await guard.highest()).toBe(before);
    expect(await schema.pool.query(`SELECT 1 FROM fenced_fences_applied WHERE resource = $1`, [resource]).then((r) => r.rowCount)).toBe(0);
    expect(events.some((e) => e.type === 'envelope.refused' && e.code === 'BAD_SIGNATURE')).toBe(true);
  });

  it('an old genuine envelope replayed is harmless: duplicate, or stale after a newer leader', async () => {
    const { handle, resource } = setup({ keys });
    const old = sign(envelope({ token: '5' }));
    await handle(old);
    expect(await handle(old)).toMatchObject({ status: 'duplicate' });
    await handle(sign(envelope({ token: '6' })));
    const replayedElsewhere = sign(envelope({ token: '5' }));
    await expect(handle(replayedElsewhere)).rejects.toSatisfy((e: unknown) => isFencedError(e, 'STALE_TOKEN'));
    expect(await ledgerRows(resource)).toHaveLength(2);
  });

  it('recovers from a poisoned fence only through the audited admin operation', async () => {
    // Without keys, a forged huge token is accepted once and locks every honest leader out.
    const { guard, handle, resource } = setup();
    await handle(envelope({ token: '9223372036854775807' }));
    await expect(handle(envelope({ token: '7' }))).rejects.toSatisfy((e: unknown) => isFencedError(e, 'STALE_TOKEN'));
    const previous = await guard.lowerFence({ token: 7n, actor: 'oncall@example.com', reason: 'forged envelope, ticket OPS-1' });
    expect(previous).toBe(2n ** 63n - 1n);
    expect(await handle(envelope({ token: '7' }))).toMatchObject({ status: 'applied' });
    const audit = await schema.pool.query(`SELECT from_token::text, to_token::text, actor, reason FROM fenced_fences_audit WHERE resource = $1`, [resource]);
    expect(audit.rows).toEqual([{ from_token: '9223372036854775807', to_token: '7', actor: 'oncall@example.com', reason: 'forged envelope, ticket OPS-1' }]);
    // Who and why are required (typed refusals, nothing changed): the fence stays at 7.
    const refusedOn = (path: string) => (e: unknown) => isFencedError(e, 'INVALID_CONFIG') && e.issues.some((i) => i.path === path);
    await expect(guard.lowerFence({ token: 1n, actor: ' ', reason: 'x' })).rejects.toSatisfy(refusedOn('actor'));
    await expect(guard.lowerFence({ token: 1n, actor: 'oncall@example.com', reason: '' })).rejects.toSatisfy(refusedOn('reason'));
    await expect(guard.pruneAppliedFires(-1)).rejects.toSatisfy(refusedOn('olderThanMs'));
    expect(await guard.highest()).toBe(7n);
  });
});

describe('Redis stopped in the middle of a run', () => {
  it('keeps handlers working through PostgreSQL, says so, and accepts nothing stale', async () => {
    const server = await startRedisServer();
    const flaky = createRedis(server.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false });
    const events: FencedEvent[] = [];
    const { guard, resource } = setup({ redis: flaky, logger: (e) => events.push(e) });
    const started = new Set<string>();
    const write = insertLedger(resource);
    const handle = guard.wrapHandler<string>((payload, ctx) => (started.add(ctx.fireId), write(payload, ctx)), { onStale: 'return' });
    try {
      const outcomes: string[] = [];
      const staleFires: string[] = [];
      for (let i = 0; i < 30; i++) {
        if (i === 10) await server.kill();
        const token = i < 20 ? 5 : 6; // a new leader appears while Redis is down
        outcomes.push((await handle(envelope({ token: String(token) }))).status);
        // A stale envelope (token 4, then 5 after the new leader) is refused every time.
        const stale = envelope({ token: String(token - 1) });
        staleFires.push(stale.fireId);
        outcomes.push((await handle(stale)).status);
      }
      expect(outcomes.filter((_, i) => i % 2 === 0).every((s) => s === 'applied')).toBe(true);
      expect(outcomes.filter((_, i) => i % 2 === 1).every((s) => s === 'stale')).toBe(true);
      // Refused before the handler started, with Redis down too: the pre-check asks PostgreSQL then,
      // so no effect outside the database happens for a stale fire either.
      expect(staleFires.filter((id) => started.has(id))).toEqual([]);
      expect(events.some((e) => e.type === 'guard.degraded')).toBe(true);
      const tokens = (await ledgerRows(resource)).map((r) => Number(r.token));
      expect(tokens).toHaveLength(30);
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]!).toBeGreaterThanOrEqual(tokens[i - 1]!);
    } finally {
      flaky.disconnect();
      await server.stop();
    }
  });
});

describe('Redis and PostgreSQL both unreachable at the pre-check', () => {
  it('fails closed before the handler starts: GuardUnavailableError, no effect anywhere', async () => {
    const server = await startRedisServer();
    const flaky = createRedis(server.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false });
    // A pool on a port where nothing listens: every connection is refused.
    const deadPool = new PgPool({ connectionString: `postgres://postgres@127.0.0.1:${await freePort()}/test`, connectionTimeoutMillis: 500 });
    deadPool.on('error', () => {});
    const { guard } = setup({ redis: flaky, db: deadPool });
    let started = 0;
    const handle = guard.wrapHandler(async () => void started++, { onStale: 'return' });
    try {
      await server.kill();
      const outcome = await handle(envelope({ token: '5' })).then(
        () => 'resolved',
        (err: unknown) => err,
      );
      expect(isFencedError(outcome, 'GUARD_UNAVAILABLE'), String(outcome)).toBe(true);
      expect(started).toBe(0);
    } finally {
      flaky.disconnect();
      await server.stop();
      await deadPool.end();
    }
  });
});

describe('applied-fire retention', () => {
  it('prunes records older than the retention, and a pruned fire would apply again', async () => {
    const { guard, handle, resource } = setup();
    const e = envelope();
    await handle(e);
    await schema.pool.query(`UPDATE fenced_fences_applied SET applied_at = now() - interval '8 days' WHERE resource = $1`, [resource]);
    expect(await guard.pruneAppliedFires()).toBeGreaterThanOrEqual(1);
    expect(await handle(e)).toMatchObject({ status: 'applied' });
    expect(await ledgerRows(resource)).toHaveLength(2);
  });
});
