// A leader frozen (SIGSTOP) inside its guarded transaction, the fence row locked, must not hold off
// the next term: another replica leads within TTL + renew interval + 1 s while the old one is still
// frozen, and the old one's write, when it wakes, fails with a typed error and leaves nothing behind.
// Real processes, a real signal, real Redis and PostgreSQL.
import { createPool, createTestSchema, createRedis, deleteKeys, isStopped, spawnTs, testDatabaseUrl, testRedisUrl, uniquePrefix, waitFor, type ChildHandle } from '#test-support';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { afterAll, beforeAll, expect, it } from 'vitest';

const TTL_MS = 3000;
const RENEW_MS = 1000;

let schema: Awaited<ReturnType<typeof createTestSchema>>;
const prefix = uniquePrefix('frozen');
const children: ChildHandle[] = [];

beforeAll(async () => {
  schema = await createTestSchema('frozen');
  await schema.pool.query('CREATE TABLE ledger (id text PRIMARY KEY, token bigint NOT NULL)');
  await createPostgresGuard({ db: schema.pool, resource: 'frozen', schema: schema.name }).migrate();
});
afterAll(async () => {
  for (const child of children) {
    child.process.kill('SIGCONT');
    child.kill('SIGKILL');
  }
  const redis = createRedis();
  await deleteKeys(redis, prefix);
  redis.disconnect();
  await schema.drop();
});

function replica(extra: Record<string, string> = {}): ChildHandle {
  const child = spawnTs('test/fixtures/guarded-leader.ts', {
    REDIS_URL: testRedisUrl(),
    DATABASE_URL: testDatabaseUrl(),
    KEY_PREFIX: prefix,
    SCHEMA: schema.name,
    TTL_MS: String(TTL_MS),
    RENEW_MS: String(RENEW_MS),
    ...extra,
  });
  children.push(child);
  return child;
}

it('a leader frozen inside its transaction is replaced within TTL + renew + 1 s, and its write fails typed when it wakes', async () => {
  const deposed = replica({ FREEZE_AFTER_WRITES: '3' });
  const first = await deposed.waitForLine((l) => l['kind'] === 'elected', 20_000);
  const successor = replica();
  await successor.waitForLine((l) => l['kind'] === 'started', 20_000);
  await deposed.waitForLine((l) => l['kind'] === 'hit', 20_000);
  const frozenAt = performance.now();
  await waitFor(() => isStopped(deposed.process.pid!), 5000);

  const elected = await successor.waitForLine((l) => l['kind'] === 'elected', 30_000);
  const takeoverMs = performance.now() - frozenAt;
  // Still frozen: the new term did not wait for it.
  expect(isStopped(deposed.process.pid!)).toBe(true);
  expect(BigInt(String(elected['token']))).toBeGreaterThan(BigInt(String(first['token'])));
  expect(takeoverMs, `next leader after ${Math.round(takeoverMs)} ms`).toBeLessThanOrEqual(TTL_MS + RENEW_MS + 1000);
  await successor.waitForLine((l) => l['kind'] === 'write' && l['outcome'] === 'committed', 10_000);

  // The deposed leader wakes: its frozen write fails with a typed error, and the process lives on.
  const from = deposed.lines.length;
  deposed.process.kill('SIGCONT');
  const woke = await deposed.waitForLine((l) => l['kind'] === 'write', 10_000, from);
  expect(woke['outcome']).toBe('failed');
  expect(woke['code']).toBe('GUARD_UNAVAILABLE');
  await deposed.waitForLine((l) => l['kind'] === 'lost', 10_000, from);
  expect(deposed.process.exitCode).toBeNull();
  const pool = createPool({ max: 1 });
  try {
    const { rowCount } = await pool.query(`SELECT 1 FROM "${schema.name}".ledger WHERE id = $1`, [woke['id']]);
    expect(rowCount).toBe(0);
    // Nothing of the old term committed after the new term's first write.
    const { rows } = await pool.query(`SELECT max(token)::text AS t FROM "${schema.name}".ledger WHERE token < $1`, [String(elected['token'])]);
    expect(rows[0].t === null || BigInt(rows[0].t) <= BigInt(String(first['token']))).toBe(true);
  } finally {
    await pool.end();
  }
}, 90_000);
