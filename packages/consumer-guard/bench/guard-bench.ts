/**
 * pnpm bench:guard — guarded vs unguarded write throughput, side by side in one run.
 *
 * Every case runs the same transaction (BEGIN, one INSERT, COMMIT) from N concurrent clients; the
 * guarded cases add the fence check. Each ratio compares a guarded case with the unguarded
 * transaction of the same shape, measured in adjacent slices (see main).
 *
 * Flags: --seconds S (one slice, default 1), --rounds R (pairs of slices per comparison, default 10),
 * --clients N (default 8), --only a,b (comparisons whose name contains one of these),
 * --json (machine-readable output only).
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Kysely, PostgresDialect, type Generated } from 'kysely';
import pg from 'pg';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { recordingCostNs, sdkMeterProvider } from './metrics-overhead.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '1' },
    rounds: { type: 'string', default: '10' },
    clients: { type: 'string', default: '8' },
    only: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
const clients = Number(args.clients);
if (!(seconds > 0) || !(rounds >= 1) || !(clients >= 1)) {
  process.stderr.write('usage: bench:guard [--seconds S] [--rounds R] [--clients N] [--json]\n');
  process.exit(2);
}

const databaseUrl = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `bench_${process.pid}_${randomBytes(3).toString('hex')}`;
const pool = new pg.Pool({ connectionString: databaseUrl, max: clients + 2, options: `-c search_path=${schema}` });
pool.on('error', () => {});

interface DB {
  ledger: { id: Generated<number>; resource: string; token: string };
}
const kysely = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });

// One guard per resource, created once: factories validate their options, which is not per-write work.
const memo = <G>(make: (resource: string) => G) => {
  const cache = new Map<string, G>();
  return (resource: string): G => {
    let guard = cache.get(resource);
    if (guard === undefined) cache.set(resource, (guard = make(resource)));
    return guard;
  };
};
const guardFor = memo((resource) => createPostgresGuard({ db: pool, resource, schema }));
const kyselyGuardFor = memo((resource) => createPostgresGuard({ db: kysely, pool, resource, schema }));
// The same guard with an OpenTelemetry SDK behind its instruments (the others record into the API's no-ops).
const meterProvider = sdkMeterProvider();
const meteredGuardFor = memo((resource) => createPostgresGuard({ db: pool, resource, schema, meterProvider }));

type Worker = (client: number, i: number) => Promise<unknown>;

const insertPg = (c: pg.PoolClient | pg.Pool, resource: string, token: bigint) =>
  c.query('INSERT INTO ledger (resource, token) VALUES ($1, $2)', [resource, token.toString()]);

async function unguardedPg(resource: string, token: bigint): Promise<void> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await insertPg(c, resource, token);
    await c.query('COMMIT');
  } finally {
    c.release();
  }
}

/**
 * The floor of the design: what any guard that reads (and locks) the fence row in the write's own
 * transaction pays at least. The read rides in BEGIN's round trip, as the guard's check does, so each
 * case has the same three round trips as the unguarded transaction (BEGIN+read, INSERT, COMMIT).
 */
async function floorPg(read: string): Promise<void> {
  const c = await pool.connect();
  try {
    await c.query(`BEGIN; ${read}`);
    await insertPg(c, 'same', 7n);
    await c.query('COMMIT');
  } finally {
    c.release();
  }
}
const FENCE_ROW = `SELECT token FROM ${schema}.fenced_fences WHERE resource = 'same'`;

/** A realistic transaction: an invoice with its lines, a balance update and a read back (four statements). */
async function invoiceStatements(c: pg.PoolClient, token: bigint): Promise<void> {
  const amount = Number(token % 1000n) + 1;
  const { rows } = await c.query('INSERT INTO invoices (token, amount) VALUES ($1, $2) RETURNING id', [token.toString(), amount]);
  await c.query('INSERT INTO invoice_lines (invoice_id, sku, cents) VALUES ($1, $2, $3), ($1, $4, $5)', [rows[0].id, 'a', amount, 'b', amount * 2]);
  await c.query('UPDATE balances SET cents = cents + $1 WHERE account = $2', [amount * 3, (amount % 64) + 1]);
  await c.query('SELECT cents FROM balances WHERE account = $1', [(amount % 64) + 1]);
}

let raiseCounter = 1_000_000n;
const manyTokens = new Map<number, bigint>();

const cases: Record<string, Worker> = {
  'unguarded one-resource': (_c) => unguardedPg('one', 1n),
  'floor: SELECT 1 in BEGIN': () => floorPg('SELECT 1'),
  'floor: fence row SELECT in BEGIN': () => floorPg(FENCE_ROW),
  'floor: fence row SELECT FOR SHARE in BEGIN': () => floorPg(`${FENCE_ROW} FOR SHARE`),
  // The guard's own check statement sent by hand: what the guard costs on the server, without its client-side work.
  'the check function in BEGIN': () => floorPg(`SELECT ${schema}.fenced_fences_check('same', 7, false, NULL)`),
  'unguarded invoice': async () => {
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      await invoiceStatements(c, 7n);
      await c.query('COMMIT');
    } finally {
      c.release();
    }
  },
  'same-token invoice': () => guardFor('invoice').guardedWrite(7n, (c) => invoiceStatements(c as pg.PoolClient, 7n)),
  'unguarded many-resources': (c) => unguardedPg(`many-${c}`, 1n),
  'unguarded kysely one-resource': () =>
    kysely.transaction().execute(async (trx) => {
      await trx.insertInto('ledger').values({ resource: 'one-k', token: '1' }).execute();
    }),
  'same-token one-resource': () => guardFor('same').guardedWrite(7n, (c) => insertPg(c as pg.PoolClient, 'same', 7n)),
  'same-token one-resource, metrics on': () => meteredGuardFor('same').guardedWrite(7n, (c) => insertPg(c as pg.PoolClient, 'same', 7n)),
  'same-token one-resource kysely': () =>
    kyselyGuardFor('same-k').guardedWrite(7n, (trx) => trx.insertInto('ledger').values({ resource: 'same-k', token: '7' }).execute()),
  'rising-token many-resources': (c) => {
    const token = (manyTokens.get(c) ?? 0n) + 1n;
    manyTokens.set(c, token);
    return guardFor(`rise-${c}`).guardedWrite(token, (cl) => insertPg(cl as pg.PoolClient, `rise-${c}`, token));
  },
  'raising-token one-resource': () => {
    const token = ++raiseCounter;
    return guardFor('raise').guardedWrite(token, (cl) => insertPg(cl as pg.PoolClient, 'raise', token)).catch((err: unknown) => {
      // Every write raises; one that lost the race to a higher token is refused as stale. Count as work.
      if ((err as { code?: string }).code !== 'STALE_TOKEN') throw err;
    });
  },
  'naive upsert one-resource': async () => {
    // The design we replace: INSERT … ON CONFLICT DO UPDATE on every write serializes on the row.
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      const r = await c.query(
        `INSERT INTO naive_fence (resource, token) VALUES ('naive', 7) ON CONFLICT (resource) DO UPDATE SET token = greatest(naive_fence.token, EXCLUDED.token) RETURNING token`,
      );
      if (BigInt(r.rows[0].token) > 7n) throw new Error('stale');
      await insertPg(c, 'naive', 7n);
      await c.query('COMMIT');
    } finally {
      c.release();
    }
  },
};

/** Runs `worker` from `clients` concurrent loops for `seconds`; returns transactions per second. */
async function measure(worker: Worker, forSeconds: number): Promise<number> {
  const started = performance.now();
  const deadline = started + forSeconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      for (let i = 0; performance.now() < deadline; i++) {
        await worker(c, i);
        done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** A guarded case and the unguarded transaction of the same shape it is compared with. */
const comparisons: Array<{ name: string; guarded: string; baseline: string }> = [
  { name: 'floor SELECT 1', guarded: 'floor: SELECT 1 in BEGIN', baseline: 'unguarded one-resource' },
  { name: 'floor plain SELECT', guarded: 'floor: fence row SELECT in BEGIN', baseline: 'unguarded one-resource' },
  { name: 'floor SELECT FOR SHARE', guarded: 'floor: fence row SELECT FOR SHARE in BEGIN', baseline: 'unguarded one-resource' },
  { name: 'check function by hand', guarded: 'the check function in BEGIN', baseline: 'unguarded one-resource' },
  { name: 'same-token one-resource', guarded: 'same-token one-resource', baseline: 'unguarded one-resource' },
  { name: 'same-token invoice', guarded: 'same-token invoice', baseline: 'unguarded invoice' },
  // The gap to the floor measured directly, pair by pair: two ratios taken against the unguarded
  // transaction in different slices differ by the machine's drift as well, often by 0.03-0.05 here.
  { name: 'guard over floor SELECT FOR SHARE', guarded: 'same-token one-resource', baseline: 'floor: fence row SELECT FOR SHARE in BEGIN' },
  { name: 'guard over its check function by hand', guarded: 'same-token one-resource', baseline: 'the check function in BEGIN' },
  { name: 'metrics on over off, same-token one-resource', guarded: 'same-token one-resource, metrics on', baseline: 'same-token one-resource' },
  { name: 'same-token one-resource kysely', guarded: 'same-token one-resource kysely', baseline: 'unguarded kysely one-resource' },
  { name: 'rising-token many-resources', guarded: 'rising-token many-resources', baseline: 'unguarded many-resources' },
  { name: 'raising-token one-resource', guarded: 'raising-token one-resource', baseline: 'unguarded one-resource' },
  { name: 'naive upsert one-resource', guarded: 'naive upsert one-resource', baseline: 'unguarded one-resource' },
];

async function main(): Promise<void> {
  await pool.query(`CREATE SCHEMA ${schema}`);
  try {
    await pool.query(`CREATE TABLE ledger (id serial PRIMARY KEY, resource text NOT NULL, token bigint NOT NULL)`);
    await pool.query(`CREATE TABLE naive_fence (resource text PRIMARY KEY, token bigint NOT NULL)`);
    await pool.query(`CREATE TABLE invoices (id serial PRIMARY KEY, token bigint NOT NULL, amount int NOT NULL)`);
    await pool.query(`CREATE TABLE invoice_lines (id serial PRIMARY KEY, invoice_id int NOT NULL, sku text NOT NULL, cents int NOT NULL)`);
    await pool.query(`CREATE TABLE balances (account int PRIMARY KEY, cents bigint NOT NULL)`);
    await pool.query(`INSERT INTO balances SELECT g, 0 FROM generate_series(1, 64) g`);
    await guardFor('x').migrate();
    await guardFor('same').guardedWrite(7n, async () => undefined); // the fence row the floors read
    // Warm up connections, plans and the JIT.
    for (const worker of Object.values(cases)) await measure(worker, 0.3);

    // Each comparison runs as pairs of slices, baseline and guarded back to back in alternating
    // order (AB BA AB …), and each pair gives one ratio. This machine's speed drifts by more than the
    // effect we measure from one second to the next; pairing cancels the drift, the median the outliers.
    const tps = new Map<string, number[]>();
    const ratios = new Map<string, number[]>();
    const wanted = args.only?.split(',').map((s) => s.trim());
    for (const { name, guarded, baseline } of comparisons.filter((c) => wanted === undefined || wanted.some((w) => c.name.includes(w)))) {
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 === 0 ? [baseline, guarded] : [guarded, baseline];
        const got: Record<string, number> = {};
        for (const c of order) got[c] = await measure(cases[c]!, seconds);
        for (const c of order) tps.set(c, [...(tps.get(c) ?? []), got[c]!]);
        ratios.set(name, [...(ratios.get(name) ?? []), got[guarded]! / got[baseline]!]);
      }
      if (!args.json) process.stderr.write(`${name}: ${ratios.get(name)!.map((x) => x.toFixed(2)).join(' ')}\n`);
    }
    const recording = wanted === undefined || wanted.some((w) => 'metrics'.includes(w)) ? recordingCostNs(meterProvider) : { on: NaN, off: NaN };
    const medianTps = Object.fromEntries([...tps].map(([k, v]) => [k, Math.round(median(v))]));
    const medianRatios = Object.fromEntries([...ratios].map(([k, v]) => [k, Math.round(median(v) * 100) / 100]));
    if (args.json) {
      process.stdout.write(`${JSON.stringify({ clients, seconds, pairs: rounds, tps: medianTps, ratios: medianRatios, metricsRecordingNs: recording }, null, 2)}\n`);
      return;
    }
    process.stdout.write(`guard benchmark: ${clients} clients, ${rounds} pairs of ${seconds}s slices per comparison, median tx/s\n`);
    for (const [name, value] of Object.entries(medianTps)) process.stdout.write(`  ${name.padEnd(34)} ${String(value).padStart(8)} tx/s\n`);
    for (const [name, value] of Object.entries(medianRatios)) process.stdout.write(`ratio ${name}: ${value.toFixed(2)}\n`);
    const floor = medianRatios['floor SELECT FOR SHARE'];
    const guard = medianRatios['same-token one-resource'];
    const direct = medianRatios['guard over floor SELECT FOR SHARE'];
    if (floor !== undefined && guard !== undefined) {
      process.stdout.write(`target one insert: guard ${guard.toFixed(2)} >= floor SELECT FOR SHARE ${floor.toFixed(2)} - 0.03 = ${(floor - 0.03).toFixed(2)}: ${guard >= floor - 0.03 ? 'met' : 'not met'}\n`);
    }
    if (floor !== undefined && direct !== undefined) {
      // The same target from the direct pairs: guard >= floor - 0.03 means guard/floor >= 1 - 0.03/floor.
      const needed = 1 - 0.03 / floor;
      process.stdout.write(`target one insert, paired against the floor: guard/floor ${direct.toFixed(2)} >= ${needed.toFixed(2)}: ${direct >= needed ? 'met' : 'not met'}\n`);
    }
    const invoice = medianRatios['same-token invoice'];
    if (invoice !== undefined) process.stdout.write(`target invoice: guard ${invoice.toFixed(2)} >= 0.90: ${invoice >= 0.9 ? 'met' : 'not met'}\n`);
    if (!Number.isNaN(recording.on)) process.stdout.write(`metrics recording per guarded write: ${recording.on} ns with the SDK, ${recording.off} ns without one (no-op API)\n`);
  } finally {
    await meterProvider.shutdown();
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await kysely.destroy();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:guard failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
