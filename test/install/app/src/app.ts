/**
 * A new user's app, compiled and run against the packages as installed from their tarballs: three
 * fences' worth of the README in one process. A scheduler on a Redis lease dispatches a fire to a
 * wrapped handler that writes through Kysely; then a newer token's write raises the fence and the old
 * token is refused. Prints one JSON line; exits non-zero on anything unexpected.
 *
 * Env: DATABASE_URL, REDIS_URL, SUFFIX (unique per run: the schema and the Redis keys use it).
 */
import { createCoordinator, createScheduler } from '@fenced/coordinator';
import { createGuard, type HandlerOutcome } from '@fenced/consumer-guard';
import { createRedisGuard } from '@fenced/consumer-guard/redis';
import { isFencedError, type Envelope, type Token } from '@fenced/shared';
import { SCENARIO_NAMES, type SimApp } from '@fenced/chaos';
import { Redis } from 'ioredis';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';

interface Database {
  ledger: { fire_id: string; token: string };
}

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is required`);
  return value;
};
const suffix = env('SUFFIX');
const schema = `install_${suffix}`;
const keyPrefix = `install-${suffix}`;

const pool = new pg.Pool({ connectionString: env('DATABASE_URL'), max: 4 });
const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
const redis = new Redis(env('REDIS_URL'));

// The chaos package's types and values resolve too (a user's own simulation imports them).
const scenarioCount: number = SCENARIO_NAMES.length;
const appShape: Pick<SimApp, 'name'> = { name: 'install-check' };

try {
  await pool.query(`CREATE SCHEMA ${schema}`);
  await pool.query(`CREATE TABLE ${schema}.ledger (fire_id text PRIMARY KEY, token bigint NOT NULL)`);

  const guard = createGuard({ db, pool, redis, resource: 'ledger', schema, keyPrefix });
  await guard.migrate();
  const handle = guard.wrapHandler(
    (_payload, ctx) =>
      ctx.guardedWrite((trx) => trx.withSchema(schema).insertInto('ledger').values({ fire_id: ctx.fireId, token: ctx.token.toString() }).execute()),
    { onStale: 'return' },
  );

  let firstOutcome: (outcome: HandlerOutcome<unknown>) => void = () => {};
  const outcome = new Promise<HandlerOutcome<unknown>>((resolve) => (firstOutcome = resolve));
  const coordinator = createCoordinator({ redis, lease: 'ledger', keyPrefix, ttlMs: 3_000, renewIntervalMs: 1_000, fences: [guard] });
  const scheduler = createScheduler({
    coordinator,
    jobs: { ledger: { everyMs: 200, handler: async (envelope: Envelope) => firstOutcome(await handle(envelope)) } },
    misfire: 'skip',
  });
  scheduler.start();
  await coordinator.start();
  const first = await withTimeout(outcome, 45_000, 'the first fire');
  await scheduler.stop();
  await coordinator.stop();
  if (first.status !== 'applied') throw new Error(`the first fire was ${first.status}`);

  // A newer leader's write raises the fence; the old token is refused, and fn never runs.
  const token: Token = first.token;
  await guard.guardedWrite(token + 1n, async () => undefined);
  let refusedAt: Token | undefined;
  try {
    await guard.guardedWrite(token, async () => {
      throw new Error('fn ran for a stale token');
    });
  } catch (err) {
    if (!isFencedError(err, 'STALE_TOKEN')) throw err;
    refusedAt = err.highest;
  }
  if (refusedAt !== token + 1n) throw new Error(`the stale write was not refused at ${token + 1n}`);

  // The Redis guard's subpath: a stale check is answered by the mark alone.
  const redisGuard = createRedisGuard({ redis, resource: 'ledger', keyPrefix });
  await redisGuard.raise(token + 1n);
  const mark: Token | null = await redisGuard.check(token + 1n);
  if (mark !== token + 1n) throw new Error(`the Redis mark is ${mark}, not ${token + 1n}`);

  const rows = await db.withSchema(schema).selectFrom('ledger').selectAll().execute();
  process.stdout.write(`${JSON.stringify({ ok: true, applied: rows.length, token: token.toString(), refusedAt: refusedAt.toString(), mark: mark.toString(), scenarioCount, app: appShape.name })}\n`);
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  for (const key of await redis.keys(`${keyPrefix}*`)) await redis.del(key);
  redis.disconnect();
  await db.destroy();
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not arrive within ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
