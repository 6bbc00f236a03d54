/**
 * pnpm bench:handler — the handler wrapper's costs, side by side in one run.
 *
 * 1. Refusing a stale envelope: on the Redis fast path (combined guard) vs through PostgreSQL
 *    (PostgreSQL-only guard), one call at a time; latency percentiles.
 * 2. Throughput of a wrapped handler (validation, Redis check, fenced transaction that claims the fire
 *    id, mark kept in step) vs a bare handler doing the same write in a plain transaction, 8 concurrent
 *    callers, measured in adjacent slices (AB BA …) and compared pair by pair.
 *
 * Flags: --seconds S (slice, default 1), --rounds R (pairs, default 8), --clients N (default 8), --json.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createGuard } from '@fenced/consumer-guard';
import type { Envelope } from '@fenced/shared';
import { sdkMeterProvider } from './metrics-overhead.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '1' },
    rounds: { type: 'string', default: '8' },
    clients: { type: 'string', default: '8' },
    samples: { type: 'string', default: '2000' },
    json: { type: 'boolean', default: false },
  },
});
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
const clients = Number(args.clients);
const samples = Number(args.samples);
if (!(seconds > 0) || !(rounds >= 1) || !(clients >= 1) || !(samples >= 10)) {
  process.stderr.write('usage: bench:handler [--seconds S] [--rounds R] [--clients N] [--samples N] [--json]\n');
  process.exit(2);
}

const databaseUrl = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const schema = `hbench_${process.pid}_${randomBytes(3).toString('hex')}`;
const keyPrefix = `fenced-hbench-${process.pid}`;
const pool = new pg.Pool({ connectionString: databaseUrl, max: clients + 2, options: `-c search_path=${schema}` });
pool.on('error', () => {});
const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
redis.on('error', () => {});

const combined = createGuard({ db: pool, redis, resource: 'ledger', schema, keyPrefix });
const pgOnly = createGuard({ db: pool, resource: 'ledger', schema });
// The combined guard again, with an OpenTelemetry SDK behind its instruments.
const meterProvider = sdkMeterProvider();
const metered = createGuard({ db: pool, redis, resource: 'ledger', schema, keyPrefix, meterProvider });

let fireSeq = 0;
const envelope = (token: string): Envelope => ({
  v: 1,
  job: 'ledger',
  fireId: `ledger@${++fireSeq}`,
  scheduledAt: '2026-11-29T10:00:00.000Z',
  token,
  issuer: 'bench',
  payload: { amount: fireSeq % 1000 },
});

/** The handler's database work, in two shapes: a single row, and a small invoice run. */
const shapes = {
  'one insert': async (c: pg.PoolClient, fireId: string, token: string, amount: number) => {
    await c.query('INSERT INTO ledger (fire_id, token, amount) VALUES ($1, $2, $3)', [fireId, token, amount]);
  },
  'invoice (4 statements)': async (c: pg.PoolClient, fireId: string, token: string, amount: number) => {
    const { rows } = await c.query('INSERT INTO ledger (fire_id, token, amount) VALUES ($1, $2, $3) RETURNING id', [fireId, token, amount]);
    await c.query('INSERT INTO lines (ledger_id, sku, cents) VALUES ($1, $2, $3), ($1, $4, $5)', [rows[0].id, 'a', amount, 'b', amount * 2]);
    await c.query('UPDATE balances SET cents = cents + $1 WHERE account = $2', [amount * 3, (amount % 64) + 1]);
    await c.query('SELECT cents FROM balances WHERE account = $1', [(amount % 64) + 1]);
  },
} as const;
type Shape = keyof typeof shapes;

const wrappedFor = (shape: Shape, guard = combined) =>
  guard.wrapHandler<unknown>((payload, ctx) =>
    ctx.guardedWrite((c) => shapes[shape](c, ctx.fireId, ctx.token.toString(), (payload as { amount: number }).amount)),
  );

/**
 * The floor of the wrapper's design on PostgreSQL: the bare handler's transaction plus what any
 * fenced handler must add to it, the fence row read FOR SHARE in BEGIN's round trip and the claim row
 * of the fire, and nothing else (no envelope validation, no Redis, no function call).
 */
const floorFor = (shape: Shape) => async (e: Envelope): Promise<void> => {
  const c = await pool.connect();
  try {
    await c.query(`BEGIN; SELECT token FROM ${schema}.fenced_fences WHERE resource = 'ledger' AND token >= ${BigInt(e.token)} FOR SHARE`);
    await c.query(`INSERT INTO ${schema}.fenced_fences_applied (resource, fire_id, token) VALUES ('ledger', $1, $2)`, [e.fireId, e.token]);
    await shapes[shape](c, e.fireId, e.token, (e.payload as { amount: number }).amount);
    await c.query('COMMIT');
  } finally {
    c.release();
  }
};

/** The same work with nothing around it: what a handler does without fenced. */
const bareFor = (shape: Shape) => async (e: Envelope): Promise<void> => {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await shapes[shape](c, e.fireId, e.token, (e.payload as { amount: number }).amount);
    await c.query('COMMIT');
  } finally {
    c.release();
  }
};

async function measure(call: () => Promise<unknown>, forSeconds: number): Promise<number> {
  const started = performance.now();
  const deadline = started + forSeconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < deadline) {
        await call();
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

const pct = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;
const median = (xs: number[]) => pct(xs, 0.5);

async function main(): Promise<void> {
  await pool.query(`CREATE SCHEMA ${schema}`);
  try {
    await pool.query(`CREATE TABLE ledger (id serial PRIMARY KEY, fire_id text NOT NULL, token bigint NOT NULL, amount int NOT NULL)`);
    await pool.query(`CREATE TABLE lines (id serial PRIMARY KEY, ledger_id int NOT NULL, sku text NOT NULL, cents int NOT NULL)`);
    await pool.query(`CREATE TABLE balances (account int PRIMARY KEY, cents bigint NOT NULL)`);
    await pool.query(`INSERT INTO balances SELECT g, 0 FROM generate_series(1, 64) g`);
    await combined.migrate();
    await wrappedFor('one insert')(envelope('10')); // fence and mark at 10

    // 1. Stale refusal latency, alternating the two paths call by call.
    // A bare GET of the mark, alternated with the refusals: the Redis round trip the refusal on the
    // fast path cannot go below.
    const staleVia = { redis: [] as number[], postgres: [] as number[], get: [] as number[] };
    const staleCombined = combined.wrapHandler(async () => undefined, { onStale: 'return' });
    const stalePg = pgOnly.wrapHandler(async () => undefined, { onStale: 'return' });
    const markKey = (await import('@fenced/consumer-guard/redis')).createRedisGuard({ redis, resource: 'ledger', keyPrefix }).markKey;
    for (let i = 0; i < samples; i++) {
      for (const [via, handle] of [['redis', staleCombined], ['postgres', stalePg]] as const) {
        const t0 = performance.now();
        const outcome = await handle(envelope('9'));
        staleVia[via].push((performance.now() - t0) * 1000);
        if (outcome.status !== 'stale') throw new Error(`expected a stale outcome, got ${outcome.status}`);
      }
      const t0 = performance.now();
      await redis.get(markKey);
      staleVia.get.push((performance.now() - t0) * 1000);
    }

    // 2. Throughput, paired slices, per shape.
    const throughput: Record<string, { bare: number; wrapped: number; ratio: number; floor: number; floorRatio: number; overFloor: number }> = {};
    for (const shape of Object.keys(shapes) as Shape[]) {
      // The floor, paired with the bare handler and with the wrapped one in the same way.
      const floor = floorFor(shape);
      const floorPairs = { overBare: [] as number[], wrappedOver: [] as number[], tps: [] as number[] };
      {
        const wrapped = wrappedFor(shape);
        const bare = bareFor(shape);
        await measure(() => floor(envelope('10')), 0.3);
        for (let r = 0; r < rounds; r++) {
          const order = r % 2 === 0 ? (['bare', 'floor', 'wrapped'] as const) : (['wrapped', 'floor', 'bare'] as const);
          const got = { bare: 0, floor: 0, wrapped: 0 };
          for (const which of order) got[which] = await measure(() => (which === 'bare' ? bare : which === 'floor' ? floor : wrapped)(envelope('10')), seconds);
          floorPairs.overBare.push(got.floor / got.bare);
          floorPairs.wrappedOver.push(got.wrapped / got.floor);
          floorPairs.tps.push(got.floor);
          if (!args.json) process.stderr.write(`${shape} floor triple ${r + 1}/${rounds}: bare ${got.bare.toFixed(0)}, floor ${got.floor.toFixed(0)}, wrapped ${got.wrapped.toFixed(0)} tx/s\n`);
        }
      }
      const wrapped = wrappedFor(shape);
      const bare = bareFor(shape);
      await measure(() => wrapped(envelope('10')), 0.3);
      await measure(() => bare(envelope('10')), 0.3);
      const ratios: number[] = [];
      const tps = { wrapped: [] as number[], bare: [] as number[] };
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 === 0 ? (['bare', 'wrapped'] as const) : (['wrapped', 'bare'] as const);
        const got = { wrapped: 0, bare: 0 };
        for (const which of order) got[which] = await measure(which === 'wrapped' ? () => wrapped(envelope('10')) : () => bare(envelope('10')), seconds);
        tps.wrapped.push(got.wrapped);
        tps.bare.push(got.bare);
        ratios.push(got.wrapped / got.bare);
        if (!args.json) process.stderr.write(`${shape} pair ${r + 1}/${rounds}: bare ${got.bare.toFixed(0)} tx/s, wrapped ${got.wrapped.toFixed(0)} tx/s\n`);
      }
      throughput[shape] = {
        bare: Math.round(median(tps.bare)),
        wrapped: Math.round(median(tps.wrapped)),
        ratio: Math.round(median(ratios) * 100) / 100,
        floor: Math.round(median(floorPairs.tps)),
        floorRatio: Math.round(median(floorPairs.overBare) * 100) / 100,
        overFloor: Math.round(median(floorPairs.wrappedOver) * 100) / 100,
      };
    }

    // 3. The instruments: the same wrapped handler with and without an SDK, paired the same way.
    const metricsRatios: number[] = [];
    {
      const off = wrappedFor('one insert');
      const on = wrappedFor('one insert', metered);
      await measure(() => on(envelope('10')), 0.3);
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const);
        const got = { on: 0, off: 0 };
        for (const which of order) got[which] = await measure(which === 'on' ? () => on(envelope('10')) : () => off(envelope('10')), seconds);
        metricsRatios.push(got.on / got.off);
        if (!args.json) process.stderr.write(`metrics pair ${r + 1}/${rounds}: off ${got.off.toFixed(0)} tx/s, on ${got.on.toFixed(0)} tx/s\n`);
      }
    }

    const result = {
      staleRejectionMicros: {
        redis: { median: Math.round(median(staleVia.redis)), p99: Math.round(pct(staleVia.redis, 0.99)) },
        postgres: { median: Math.round(median(staleVia.postgres)), p99: Math.round(pct(staleVia.postgres, 0.99)) },
        bareGet: { median: Math.round(median(staleVia.get)), p99: Math.round(pct(staleVia.get, 0.99)) },
      },
      throughput,
      ratios: {
        'stale rejection postgres over redis': Math.round((median(staleVia.postgres) / median(staleVia.redis)) * 100) / 100,
        'stale rejection redis over a bare GET, median': Math.round((median(staleVia.redis) / median(staleVia.get)) * 100) / 100,
        'stale rejection redis over a bare GET, p99': Math.round((pct(staleVia.redis, 0.99) / pct(staleVia.get, 0.99)) * 100) / 100,
        ...Object.fromEntries(Object.entries(throughput).map(([shape, t]) => [`wrapped over bare handler, ${shape}`, t.ratio])),
        ...Object.fromEntries(Object.entries(throughput).map(([shape, t]) => [`floor over bare handler, ${shape}`, t.floorRatio])),
        ...Object.fromEntries(Object.entries(throughput).map(([shape, t]) => [`wrapped over floor, ${shape}`, t.overFloor])),
        'metrics on over off, wrapped handler, one insert': Math.round(median(metricsRatios) * 100) / 100,
      },
    };
    if (args.json) {
      process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
      return;
    }
    const s = result.staleRejectionMicros;
    process.stdout.write(`handler benchmark: ${samples} stale envelopes per path; ${clients} clients, ${rounds} pairs of ${seconds}s slices\n`);
    process.stdout.write(`stale rejection via redis: median ${s.redis.median} µs, p99 ${s.redis.p99} µs\n`);
    process.stdout.write(`stale rejection via postgres: median ${s.postgres.median} µs, p99 ${s.postgres.p99} µs\n`);
    process.stdout.write(`bare GET of the mark: median ${s.bareGet.median} µs, p99 ${s.bareGet.p99} µs\n`);
    for (const [shape, t] of Object.entries(throughput)) {
      process.stdout.write(`throughput ${shape}: bare handler ${t.bare} tx/s, floor ${t.floor} tx/s, wrapped handler ${t.wrapped} tx/s\n`);
    }
    for (const [name, value] of Object.entries(result.ratios)) process.stdout.write(`ratio ${name}: ${value.toFixed(2)}\n`);
    const r = result.ratios as Record<string, number>;
    const one = throughput['one insert']!;
    const invoice = throughput['invoice (4 statements)']!;
    process.stdout.write(`target one insert: wrapped ${one.ratio.toFixed(2)} >= floor ${one.floorRatio.toFixed(2)} - 0.05 = ${(one.floorRatio - 0.05).toFixed(2)}: ${one.ratio >= one.floorRatio - 0.05 ? 'met' : 'not met'}\n`);
    process.stdout.write(`target invoice: wrapped ${invoice.ratio.toFixed(2)} >= 0.85: ${invoice.ratio >= 0.85 ? 'met' : 'not met'}\n`);
    const staleMedian = r['stale rejection redis over a bare GET, median']!;
    const staleP99 = r['stale rejection redis over a bare GET, p99']!;
    process.stdout.write(`target stale refusal on redis <= 2 x bare GET: median ${staleMedian.toFixed(2)}x, p99 ${staleP99.toFixed(2)}x: ${staleMedian <= 2 && staleP99 <= 2 ? 'met' : 'not met'}\n`);
  } finally {
    await meterProvider.shutdown();
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
    await pool.end();
    redis.disconnect();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:handler failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
