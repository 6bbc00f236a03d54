// Fenced HTTP services (@fenced/consumer-guard/http): the caller's header, the service's verdicts
// (applied, replayed, 409 stale, 400, 401, 503), over node:http, Express and Fastify, on PostgreSQL
// and on MariaDB. Real servers on loopback, real databases; nothing mocked.
import { createGuard, type Guard } from '@fenced/consumer-guard';
import { mysqlFences } from '@fenced/consumer-guard/mysql';
import { fireHeaders, sendFire, toExpressHandler, toFastifyHandler, toNodeListener, type FencedEndpoint, type FencedRouteHandler } from '@fenced/consumer-guard/http';
import { createEnvelope, FIRE_HEADER, isFencedError, outcomeOfResult, parseToken, signEnvelope, type Envelope } from '@fenced/shared';
import { createTestMysqlDatabase, createTestSchema, withPgClient } from '#test-support';
import express from 'express';
import Fastify from 'fastify';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { PoolConnection } from 'mysql2/promise';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const SECRET = randomBytes(32).toString('base64url');
const KEY = { kid: 'k1', secret: SECRET };
const KEYS = { k1: SECRET };

let schema: Awaited<ReturnType<typeof createTestSchema>>;
const closers: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  schema = await createTestSchema('http_fences');
  await schema.pool.query('CREATE TABLE ledger (id bigserial PRIMARY KEY, resource text NOT NULL, fire_id text NOT NULL, token bigint NOT NULL)');
  await createGuard({ db: schema.pool, resource: 'setup', schema: schema.name }).migrate();
});
afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await schema.drop();
});

let fireCount = 0;
/** A signed envelope of a fire with its own id. */
function fire(token: bigint, payload: unknown = null, sign = true): Envelope {
  const envelope = createEnvelope({ job: 'ledger', scheduledAt: Date.UTC(2026, 11, 2, 10, 0, 0, fireCount++), token: parseToken(token), issuer: 'node-a', payload });
  return sign ? signEnvelope(envelope, KEY) : envelope;
}

/** A PostgreSQL guard on its own resource, and the route every test serves: one ledger row per call. */
function pgService(resource = `r-${randomBytes(4).toString('hex')}`): { guard: Guard<pg.PoolClient>; endpoint: FencedEndpoint; runs: () => number; rows: () => Promise<Array<{ fire_id: string; token: string }>> } {
  const guard = createGuard({ db: schema.pool, resource, schema: schema.name, keys: KEYS });
  let runs = 0;
  const route: FencedRouteHandler<pg.PoolClient> = async (trx, f) => {
    runs++;
    const { rows } = await trx.query('INSERT INTO ledger (resource, fire_id, token) VALUES ($1, $2, $3) RETURNING id::text AS id', [resource, f.fireId, f.token.toString()]);
    return { status: 201, body: { entry: rows[0].id, echo: f.body, job: f.job, idempotencyKey: f.idempotencyKey }, headers: { 'x-entry': String(rows[0].id) } };
  };
  return {
    guard,
    endpoint: guard.wrapRoute(route),
    runs: () => runs,
    rows: async () => (await schema.pool.query('SELECT fire_id, token::text AS token FROM ledger WHERE resource = $1 ORDER BY id', [resource])).rows,
  };
}

type Serve = (endpoint: FencedEndpoint) => Promise<string>;

const serveNode: Serve = async (endpoint) => {
  const server = createServer(toNodeListener(endpoint));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/ledger`;
};
const serveExpress: Serve = async (endpoint) => {
  const app = express();
  app.use(express.json());
  app.post('/ledger', toExpressHandler(endpoint));
  app.use((err: unknown, _req: express.Request, res: express.Response, _next: express.NextFunction) => res.status(500).json({ error: { code: 'ROUTE_FAILED', message: (err as Error).message } }));
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/ledger`;
};
const serveFastify: Serve = async (endpoint) => {
  const app = Fastify();
  app.post('/ledger', toFastifyHandler(endpoint));
  await app.listen({ port: 0, host: '127.0.0.1' });
  closers.push(() => app.close());
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/ledger`;
};

describe.each([
  ['node:http', serveNode],
  ['Express', serveExpress],
  ['Fastify', serveFastify],
] as const)('a fenced route over %s', (_name, serve) => {
  it('applies a fire once, answers its retries with the first reply without running the route, and refuses a stale token 409 in the write', async () => {
    const service = pgService();
    const url = await serve(service.endpoint);
    const f5 = fire(5n, { invoice: 1 });
    const first = await sendFire(url, { envelope: f5, body: { amount: 12 } });
    expect(first).toMatchObject({ status: 201, outcome: 'applied', body: { echo: { amount: 12 }, job: 'ledger' } });
    expect(first.headers['x-entry']).toBe(String((first.body as { entry: string }).entry));

    const again = await sendFire(url, { envelope: f5, body: { amount: 12 } });
    expect(again).toMatchObject({ status: 201, outcome: 'replayed', body: first.body });
    expect(again.headers['x-entry']).toBe(first.headers['x-entry']);
    expect(service.runs()).toBe(1);

    await sendFire(url, { envelope: fire(7n), body: { amount: 1 } });
    const stale = await sendFire(url, { envelope: fire(6n), body: { amount: 1 } });
    expect(stale).toMatchObject({ status: 409, outcome: 'stale', body: { error: { code: 'STALE_TOKEN', token: '6', highest: '7' } } });
    // A retry of the fire token 5 applied is still answered with its first reply, though 7 leads now.
    expect(await sendFire(url, { envelope: f5, body: { amount: 12 } })).toMatchObject({ status: 201, outcome: 'replayed', body: first.body });
    expect(service.runs()).toBe(2);
    expect((await service.rows()).map((r) => r.token)).toEqual(['5', '7']);
  });

  it('answers a fire applied under an earlier token, sent again under a later one (a catch-up), 409 duplicate without running the route; the scheduler reads it as delivered', async () => {
    const service = pgService();
    const url = await serve(service.endpoint);
    const early = fire(5n);
    expect(await sendFire(url, { envelope: early, body: {} })).toMatchObject({ status: 201, outcome: 'applied' });
    const again = signEnvelope(createEnvelope({ job: early.job, scheduledAt: Date.parse(early.scheduledAt), token: parseToken(6n), issuer: 'node-b', payload: null }), KEY);
    expect(again.fireId).toBe(early.fireId);
    const answer = await sendFire(url, { envelope: again, body: {} });
    expect(answer).toMatchObject({ status: 409, outcome: 'duplicate', body: { error: { code: 'DUPLICATE_FIRE', fireId: early.fireId } } });
    expect(outcomeOfResult(answer)).toEqual({ status: 'duplicate' });
    expect(service.runs()).toBe(1);
  });

  it('refuses a missing, malformed, unsigned or forged fire header (400, 401) with a typed body, running nothing', async () => {
    const service = pgService();
    const url = await serve(service.endpoint);
    const post = (headers: Record<string, string>) =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{}' }).then(async (r) => ({ status: r.status, outcome: r.headers.get('fenced-outcome'), body: (await r.json()) as { error: { code: string; reason?: string } } }));

    expect(await post({})).toMatchObject({ status: 400, outcome: 'refused', body: { error: { code: 'INVALID_ENVELOPE' } } });
    expect(await post({ [FIRE_HEADER]: 'not base64url!' })).toMatchObject({ status: 400, body: { error: { code: 'INVALID_ENVELOPE' } } });
    expect(await post({ [FIRE_HEADER]: Buffer.from('{"v":1}').toString('base64url') })).toMatchObject({ status: 400, body: { error: { code: 'INVALID_ENVELOPE' } } });
    // Two headers (node:http joins them with a comma): refused for what it is, not as bad base64url.
    const one = fireHeaders(fire(9n))[FIRE_HEADER];
    const twice = await fetch(url, { method: 'POST', headers: new Headers([['content-type', 'application/json'], [FIRE_HEADER, one], [FIRE_HEADER, one]]), body: '{}' });
    expect(twice.status).toBe(400);
    expect(((await twice.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: 'INVALID_ENVELOPE', message: expect.stringContaining('sent more than once') });
    expect(await post(fireHeaders(fire(9n, null, false)))).toMatchObject({ status: 401, body: { error: { code: 'BAD_SIGNATURE', reason: 'unsigned' } } });
    expect(await post(fireHeaders(signEnvelope(fire(9n, null, false), { kid: 'k2', secret: SECRET })))).toMatchObject({ status: 401, body: { error: { reason: 'unknown-key' } } });
    // A token raised after signing: the signature no longer matches.
    const forged = { ...fire(9n), token: '9223372036854775807' };
    expect(await post(fireHeaders(forged))).toMatchObject({ status: 401, body: { error: { code: 'BAD_SIGNATURE', reason: 'mismatch' } } });
    // A signed fire whose payload was swapped: its digest no longer matches.
    const swapped = { ...fire(9n, { amount: 1 }), payload: { amount: 1000 } };
    expect(await post(fireHeaders(swapped))).toMatchObject({ status: 401, body: { error: { reason: 'mismatch' } } });
    expect(service.runs()).toBe(0);
    expect(await service.guard.highest()).toBeNull();
  });

  it("a route's own error rolls its write back and claims nothing: the retry runs it again", async () => {
    const resource = `r-${randomBytes(4).toString('hex')}`;
    const guard = createGuard({ db: schema.pool, resource, schema: schema.name, keys: KEYS });
    let calls = 0;
    const url = await serve(
      guard.wrapRoute(async (trx, f) => {
        calls++;
        await (trx as pg.PoolClient).query('INSERT INTO ledger (resource, fire_id, token) VALUES ($1, $2, $3)', [resource, f.fireId, f.token.toString()]);
        if (calls === 1) throw new Error('downstream failed');
        return { status: 200, body: { ok: true } };
      }),
    );
    const f = fire(3n);
    const failed = await sendFire(url, { envelope: f, body: {} });
    expect(failed.status).toBe(500);
    expect(await guard.appliedOutcome(f.fireId)).toBeNull();
    expect(await sendFire(url, { envelope: f, body: {} })).toMatchObject({ status: 200, outcome: 'applied' });
    expect((await schema.pool.query('SELECT count(*)::int AS n FROM ledger WHERE resource = $1', [resource])).rows[0].n).toBe(1);
  });
});

describe('a fenced route', () => {
  it('reads at most maxBodyBytes of a body (1 MiB unless told): a larger one is answered 413 BODY_TOO_LARGE and nothing runs', async () => {
    const service = pgService();
    const serveWith = async (options: { maxBodyBytes?: number }) => {
      const server = createServer(toNodeListener(service.endpoint, options));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      closers.push(() => new Promise((resolve) => server.close(resolve)));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/ledger`;
    };
    const small = await serveWith({ maxBodyBytes: 64 });
    expect(await sendFire(small, { envelope: fire(3n), body: { note: 'x'.repeat(100) } })).toMatchObject({ status: 413, body: { error: { code: 'BODY_TOO_LARGE' } } });
    const byDefault = await serveWith({});
    expect(await sendFire(byDefault, { envelope: fire(3n), body: { note: 'x'.repeat(1024 * 1024) } })).toMatchObject({ status: 413, body: { error: { code: 'BODY_TOO_LARGE' } } });
    expect(await sendFire(byDefault, { envelope: fire(3n), body: { note: 'x'.repeat(1000) } })).toMatchObject({ status: 201, outcome: 'applied' });
    expect(service.runs()).toBe(1);
  });

  it('answers concurrent copies of one request once: one applied, the others replayed with the same body', async () => {
    const service = pgService();
    const url = await serveNode(service.endpoint);
    const f = fire(4n);
    const answers = await Promise.all(Array.from({ length: 8 }, () => sendFire(url, { envelope: f, body: { amount: 3 } })));
    expect(answers.filter((a) => a.outcome === 'applied')).toHaveLength(1);
    expect(answers.filter((a) => a.outcome === 'replayed')).toHaveLength(7);
    for (const a of answers) expect(a.body).toEqual(answers[0]!.body);
    expect(service.runs()).toBe(1);
    expect(await service.rows()).toHaveLength(1);
  });

  it('answers 503 with Retry-After when its database connection is killed under the route, and nothing is claimed', async () => {
    const resource = `r-${randomBytes(4).toString('hex')}`;
    const guard = createGuard({ db: schema.pool, resource, schema: schema.name, keys: KEYS });
    let killed = false;
    const url = await serveNode(
      guard.wrapRoute(async (trx) => {
        const client = trx as pg.PoolClient;
        if (!killed) {
          killed = true;
          const { rows } = await client.query('SELECT pg_backend_pid() AS pid');
          await withPgClient(schema.pool, (admin) => admin.query('SELECT pg_terminate_backend($1)', [rows[0].pid]));
          await client.query('SELECT 1').catch(() => undefined);
        }
        return { status: 200, body: { ok: true } };
      }),
    );
    const f = fire(2n);
    const down = await sendFire(url, { envelope: f, body: {} });
    expect(down).toMatchObject({ status: 503, outcome: 'unavailable', body: { error: { code: 'GUARD_UNAVAILABLE' } } });
    expect(down.headers['retry-after']).toBe('1');
    expect(await guard.appliedOutcome(f.fireId)).toBeNull();
    expect(await sendFire(url, { envelope: f, body: {} })).toMatchObject({ status: 200, outcome: 'applied' });
  });

  it('refuses a reply too large to record, and a bad body, before anything commits', async () => {
    const resource = `r-${randomBytes(4).toString('hex')}`;
    const guard = createGuard({ db: schema.pool, resource, schema: schema.name, keys: KEYS });
    const url = await serveNode(guard.wrapRoute(async () => ({ status: 200, body: 'x'.repeat(2000) }), { maxReplyBytes: 1000 }));
    const f = fire(2n);
    expect((await sendFire(url, { envelope: f, body: {} })).status).toBe(500);
    expect(await guard.appliedOutcome(f.fireId)).toBeNull();
    const bad = await fetch(url, { method: 'POST', headers: { ...fireHeaders(fire(2n)), 'content-type': 'application/json' }, body: '{"unterminated' });
    expect(bad.status).toBe(400);
    expect(await guard.highest()).toBeNull();
  });

  it('the caller refuses a malformed envelope before anything is sent', async () => {
    const error = await sendFire('http://127.0.0.1:9/never', { envelope: { ...fire(1n), token: '01' } }).catch((err: unknown) => err);
    expect(isFencedError(error, 'INVALID_ENVELOPE')).toBe(true);
    expect(() => fireHeaders({ ...fire(1n), extra: true })).toThrow(/extra/);
  });

  it('the header is what docs/http-fire-header.md says: a service in another language can verify it from the document alone', () => {
    const envelope = fire(42n, { invoice: 'inv-1', lines: [2, 1] });
    const header = fireHeaders(envelope)[FIRE_HEADER];
    // Decoded and verified here with nothing of fenced: base64url JSON, and HMAC-SHA-256 over the
    // documented lines, the payload as the SHA-256 of its canonical JSON (keys sorted).
    const fields = JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as Record<string, string | number>;
    expect(Object.keys(fields).sort()).toEqual(['fireId', 'issuer', 'job', 'kid', 'payloadDigest', 'scheduledAt', 'sig', 'token', 'v']);
    expect(fields['token']).toBe('42');
    expect(fields['payloadDigest']).toBe(createHash('sha256').update('{"invoice":"inv-1","lines":[2,1]}').digest('base64url'));
    const lines = ['fenced-envelope-v1', fields['v'], fields['kid'], fields['job'], fields['fireId'], fields['token'], fields['issuer'], fields['scheduledAt'], fields['payloadDigest']].map((v) => JSON.stringify(v)).join('\n');
    expect(createHmac('sha256', SECRET).update(lines).digest('base64url')).toBe(fields['sig']);
  });
});

describe('a fenced route on MariaDB', () => {
  let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;
  beforeAll(async () => {
    db = await createTestMysqlDatabase('http_fences');
    await db.pool.query('CREATE TABLE ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, fire_id VARCHAR(600) NOT NULL, token BIGINT NOT NULL) ENGINE = InnoDB');
  });
  afterAll(async () => db.drop());

  it('applies, replays and refuses stale fires in the MySQL store', async () => {
    const guard = createGuard({ store: mysqlFences({ db: db.pool }), resource: 'ledger', keys: KEYS });
    await guard.migrate();
    let runs = 0;
    const url = await serveNode(
      guard.wrapRoute(async (trx, f) => {
        runs++;
        await (trx as PoolConnection).query('INSERT INTO ledger (fire_id, token) VALUES (?, ?)', [f.fireId, f.token.toString()]);
        return { status: 201, body: { fire: f.fireId, note: 'é✓' } };
      }),
    );
    const f = fire(10n);
    const first = await sendFire(url, { envelope: f, body: {} });
    expect(first).toMatchObject({ status: 201, outcome: 'applied', body: { note: 'é✓' } });
    expect(await sendFire(url, { envelope: f, body: {} })).toMatchObject({ status: 201, outcome: 'replayed', body: first.body });
    await sendFire(url, { envelope: fire(12n), body: {} });
    expect(await sendFire(url, { envelope: fire(11n), body: {} })).toMatchObject({ status: 409, body: { error: { code: 'STALE_TOKEN', highest: '12' } } });
    expect(runs).toBe(2);
    const [rows] = await db.pool.query('SELECT CAST(token AS CHAR) AS token FROM ledger ORDER BY id');
    expect((rows as Array<{ token: string }>).map((r) => r.token)).toEqual(['10', '12']);
  });
});
