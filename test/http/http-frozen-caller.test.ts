// A scheduler whose job calls a fenced HTTP service, its leader frozen (SIGSTOP) after the request's
// headers (the fire and its token) reached the service and before its body did. A new leader's calls
// go through; when the old one wakes, its request completes and is refused 409 STALE_TOKEN in the
// service's own transaction, and nothing is applied twice. Real processes, a real signal, a real
// HTTP server on loopback, real Redis and PostgreSQL.
import { createGuard } from '@fenced/consumer-guard';
import { toNodeListener } from '@fenced/consumer-guard/http';
import { FIRE_HEADER, parseFireHeader } from '@fenced/shared';
import { createRedis, createTestSchema, deleteKeys, isStopped, spawnTs, testRedisUrl, uniquePrefix, waitFor, type ChildHandle } from '#test-support';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';

const TTL_MS = 2000;
const RENEW_MS = 500;
const SECRET = randomBytes(32).toString('base64url');

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let server: Server;
let serviceUrl: string;
const prefix = uniquePrefix('http-frozen');
const children: ChildHandle[] = [];
/** What the service saw: each request's fire when its headers arrived, and its answer. */
const arrived: Array<{ fireId: string; token: bigint }> = [];
const answered: Array<{ fireId: string; token: bigint; status: number; outcome: string }> = [];

beforeAll(async () => {
  schema = await createTestSchema('http_frozen');
  await schema.pool.query('CREATE TABLE ledger (id bigserial PRIMARY KEY, fire_id text NOT NULL, token bigint NOT NULL)');
  const guard = createGuard({ db: schema.pool, resource: 'ledger', schema: schema.name, keys: { test: SECRET } });
  await guard.migrate();
  const listener = toNodeListener(
    guard.wrapRoute(async (trx, fire) => {
      const { rows } = await (trx as pg.PoolClient).query('INSERT INTO ledger (fire_id, token) VALUES ($1, $2) RETURNING id::text AS id', [fire.fireId, fire.token.toString()]);
      return { status: 201, body: { entry: rows[0].id, amount: (fire.body as { amount: number }).amount } };
    }),
  );
  server = createServer((req, res) => {
    const fire = parseFireHeader(req.headers[FIRE_HEADER]);
    arrived.push({ fireId: fire.fireId, token: fire.token });
    res.on('finish', () => answered.push({ fireId: fire.fireId, token: fire.token, status: res.statusCode, outcome: String(res.getHeader('fenced-outcome')) }));
    listener(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  serviceUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ledger`;
});

afterAll(async () => {
  for (const child of children) {
    child.process.kill('SIGCONT');
    child.kill('SIGKILL');
  }
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  const redis = createRedis();
  await deleteKeys(redis, prefix);
  redis.disconnect();
  await schema.drop();
});

function replica(extra: Record<string, string> = {}): ChildHandle {
  const child = spawnTs('test/fixtures/http-caller-leader.ts', {
    REDIS_URL: testRedisUrl(),
    KEY_PREFIX: prefix,
    TTL_MS: String(TTL_MS),
    RENEW_MS: String(RENEW_MS),
    EVERY_MS: '300',
    SERVICE_URL: serviceUrl,
    SIGNING_KEY: SECRET,
    ...extra,
  });
  children.push(child);
  return child;
}

it('a leader frozen after its request headers is refused 409 when it wakes, after the new leader was applied, and nothing applies twice', async () => {
  const deposed = replica({ FREEZE_ON_CALL: '3' });
  const first = await deposed.waitForLine((l) => l['kind'] === 'elected', 20_000);
  const oldToken = BigInt(String(first['token']));
  const successor = replica();
  await successor.waitForLine((l) => l['kind'] === 'started', 20_000);
  await deposed.waitForLine((l) => l['kind'] === 'hit' && l['name'] === 'http.headers-sent-before-body', 20_000);
  await waitFor(() => isStopped(deposed.process.pid!), 5000);

  // The frozen call's headers are at the service: its fire and its token arrived, no answer went out.
  await waitFor(() => arrived.some((a) => a.token === oldToken && !answered.some((b) => b.fireId === a.fireId && b.token === a.token)), 10_000);
  const frozen = arrived.find((a) => a.token === oldToken && !answered.some((b) => b.fireId === a.fireId && b.token === a.token))!;

  // A new term, and its calls are applied while the old leader is still frozen.
  const elected = await successor.waitForLine((l) => l['kind'] === 'elected', 30_000);
  const newToken = BigInt(String(elected['token']));
  expect(newToken).toBeGreaterThan(oldToken);
  await successor.waitForLine((l) => l['kind'] === 'call' && l['status'] === 201 && l['outcome'] === 'applied', 20_000);
  expect(isStopped(deposed.process.pid!)).toBe(true);

  // The old leader wakes: its body goes out, and the service refuses the late request in its write.
  const from = deposed.lines.length;
  deposed.process.kill('SIGCONT');
  const late = await deposed.waitForLine((l) => l['kind'] === 'call' && l['fireId'] === frozen.fireId, 20_000, from);
  expect(late).toMatchObject({ status: 409, outcome: 'stale', code: 'STALE_TOKEN', token: oldToken.toString() });
  expect(answered.find((a) => a.fireId === frozen.fireId && a.token === oldToken)).toMatchObject({ status: 409, outcome: 'stale' });
  await deposed.waitForLine((l) => l['kind'] === 'lost', 10_000, from);
  expect(deposed.process.exitCode).toBeNull();

  // Let the new leader call a few more times, then read the ledger: each fire applied once, and
  // nothing of the old term after the new term's first entry.
  await successor.waitForLine((l) => l['kind'] === 'call' && l['status'] === 201 && BigInt(String(l['token'])) === newToken && l['fireId'] !== frozen.fireId, 20_000);
  const { rows } = await schema.pool.query<{ id: string; fire_id: string; token: string }>('SELECT id::text, fire_id, token::text FROM ledger ORDER BY id');
  const fires = rows.map((r) => r.fire_id);
  expect(new Set(fires).size).toBe(fires.length);
  const firstOfNewTerm = rows.findIndex((r) => BigInt(r.token) >= newToken);
  expect(firstOfNewTerm).toBeGreaterThanOrEqual(0);
  expect(rows.slice(firstOfNewTerm).filter((r) => BigInt(r.token) < newToken)).toEqual([]);
  expect(rows.some((r) => r.fire_id === frozen.fireId && BigInt(r.token) === oldToken)).toBe(false);
});
