/**
 * pnpm bench:lease-checked — what lease-checked writes (the guard's `checkLease`) cost, measured:
 *
 * 1. Throughput, paired: the same guarded transaction (BEGIN with the check, one INSERT, COMMIT) from
 *    N clients with the lease check off and on, in adjacent slices (the ratio per pair, then the
 *    median), beside the unguarded transaction; then the same through the handler wrapper (an
 *    envelope per fire: its pre-check, the claim of its fire id, and with the check on, the lease
 *    held by the envelope's issuer).
 * 2. Latency while writes hold their transactions open for 1 s: renews of the lease (they must not
 *    wait: FOR NO KEY UPDATE against the writes' FOR KEY SHARE) and an election after the lease
 *    expired (it must wait for the open writes, then is granted).
 *
 * Flags: --seconds S (one slice, default 1), --rounds R (pairs, default 10), --clients N (default 8),
 * --json.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createGuard } from '@fenced/consumer-guard';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { createEnvelope } from '@fenced/shared';
import { postgresLeases } from '@fenced/coordinator/postgres';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '1' },
    rounds: { type: 'string', default: '10' },
    clients: { type: 'string', default: '8' },
    json: { type: 'boolean', default: false },
  },
});
const seconds = Number(args.seconds);
const rounds = Number(args.rounds);
const clients = Number(args.clients);
if (!(seconds > 0) || !(rounds >= 1) || !(clients >= 1)) {
  process.stderr.write('usage: bench:lease-checked [--seconds S] [--rounds R] [--clients N] [--json]\n');
  process.exit(2);
}
const databaseUrl = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `bench_lc_${process.pid}_${randomBytes(3).toString('hex')}`;
const pool = new pg.Pool({ connectionString: databaseUrl, max: clients + 6, options: `-c search_path=${schema}` });
pool.on('error', () => {});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const progress = (line: string) => void (!args.json && process.stderr.write(`${line}\n`));

async function throughput(worker: () => Promise<unknown>, forSeconds: number): Promise<number> {
  const started = performance.now();
  const deadline = started + forSeconds * 1000;
  let done = 0;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (performance.now() < deadline) {
      await worker();
      done++;
    }
  }));
  return done / ((performance.now() - started) / 1000);
}

await pool.query(`CREATE SCHEMA ${schema}`);
const results: Record<string, unknown> = {};
try {
  await pool.query(`CREATE TABLE ${schema}.ledger (id serial PRIMARY KEY, token bigint NOT NULL)`);
  const plain = createPostgresGuard({ db: pool, resource: 'plain', schema });
  const checked = createPostgresGuard({ db: pool, resource: 'checked', schema, checkLease: 'bench' });
  await plain.migrate();
  const leases = postgresLeases({ pool, schema, takeover: { graceMs: 60_000, timeoutMs: 120_000 } });
  await leases.migrate();
  const holder = leases.openLease('bench', 'bench-node', 10_000);
  const won = await holder.acquire(3_600_000, 10_000);
  if (!won.won) throw new Error('the bench lease is held by someone else');
  const token = won.token;
  const insert = (client: unknown) => (client as pg.PoolClient).query('INSERT INTO ledger (token) VALUES ($1)', [token.toString()]);
  const unguarded = async () => {
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      await insert(c);
      await c.query('COMMIT');
    } finally {
      c.release();
    }
  };
  const cases = {
    unguarded,
    plain: () => plain.guardedWrite(token, insert),
    checked: () => checked.guardedWrite(token, insert),
  };
  for (const warm of Object.values(cases)) await throughput(warm, 0.3);
  const tps: Record<keyof typeof cases, number[]> = { unguarded: [], plain: [], checked: [] };
  const ratios: number[] = [];
  for (let r = 0; r < rounds; r++) {
    // Alternate the order within a pair, so drift does not favour one side.
    const order = r % 2 === 0 ? (['plain', 'checked'] as const) : (['checked', 'plain'] as const);
    const pair: Record<string, number> = {};
    for (const name of order) pair[name] = await throughput(cases[name], seconds);
    tps.plain.push(pair['plain']!);
    tps.checked.push(pair['checked']!);
    ratios.push(pair['checked']! / pair['plain']!);
    tps.unguarded.push(await throughput(cases.unguarded, seconds));
  }
  results['throughput tx/s (median)'] = { unguarded: Math.round(median(tps.unguarded)), guard: Math.round(median(tps.plain)), 'guard + lease check': Math.round(median(tps.checked)) };
  results['lease-checked over plain guard, paired (median ratio)'] = Math.round(median(ratios) * 100) / 100;
  progress(`throughput: ${JSON.stringify(results['throughput tx/s (median)'])}; lease-checked over plain ${results['lease-checked over plain guard, paired (median ratio)']}`);

  // The same through the handler wrapper: a new fire (envelope) per call, issued by the lease's holder.
  let fires = 0;
  const base = Date.now();
  const handlerCase = (checkLease: string | undefined) => {
    const guard = createGuard({ db: pool, resource: checkLease === undefined ? 'h-plain' : 'h-checked', schema, ...(checkLease === undefined ? {} : { checkLease }) });
    const handle = guard.wrapHandler(async (_payload, ctx) => ctx.guardedWrite(insert));
    const job = checkLease === undefined ? 'plain' : 'checked';
    return () => handle(createEnvelope({ job, scheduledAt: base + ++fires, token, issuer: 'bench-node', payload: null }));
  };
  const handlers = { plain: handlerCase(undefined), checked: handlerCase('bench') };
  for (const warm of Object.values(handlers)) await throughput(warm, 0.3);
  const handlerTps: { plain: number[]; checked: number[] } = { plain: [], checked: [] };
  const handlerRatios: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? (['plain', 'checked'] as const) : (['checked', 'plain'] as const);
    const pair: Record<string, number> = {};
    for (const name of order) pair[name] = await throughput(handlers[name], seconds);
    handlerTps.plain.push(pair['plain']!);
    handlerTps.checked.push(pair['checked']!);
    handlerRatios.push(pair['checked']! / pair['plain']!);
  }
  results['handler fires/s (median)'] = { handler: Math.round(median(handlerTps.plain)), 'handler + lease check': Math.round(median(handlerTps.checked)) };
  results['lease-checked handler over plain handler, paired (median ratio)'] = Math.round(median(handlerRatios) * 100) / 100;
  progress(`handler: ${JSON.stringify(results['handler fires/s (median)'])}; lease-checked over plain ${results['lease-checked handler over plain handler, paired (median ratio)']}`);

  // Renew latency while writes hold their transactions open for 1 s (the lease row held FOR KEY SHARE).
  const holdOpen = (ms: number) =>
    checked.guardedWrite(token, async (client) => {
      await insert(client);
      await sleep(ms);
    });
  const renewMs: number[] = [];
  const idleRenewMs: number[] = [];
  for (let i = 0; i < 10; i++) {
    let t = performance.now();
    await holder.renew(won.leaseValue, 3_600_000, () => 10_000);
    idleRenewMs.push(performance.now() - t);
    const open = Array.from({ length: 4 }, () => holdOpen(1000));
    await sleep(100); // the writes have taken their locks (each check is the transaction's first statement)
    t = performance.now();
    const renewed = await holder.renew(won.leaseValue, 3_600_000, () => 10_000);
    renewMs.push(performance.now() - t);
    if (!renewed.renewed) throw new Error('a renew was refused');
    await Promise.all(open);
  }
  results['renew ms, idle (median / max)'] = [Math.round(median(idleRenewMs)), Math.round(Math.max(...idleRenewMs))];
  results['renew ms, 4 writes open for 1 s (median / max)'] = [Math.round(median(renewMs)), Math.round(Math.max(...renewMs))];
  progress(`renew: idle ${JSON.stringify(results['renew ms, idle (median / max)'])} ms, with writes open ${JSON.stringify(results['renew ms, 4 writes open for 1 s (median / max)'])} ms`);

  // Election latency after the lease expired, with writes of the old term still open for 1 s.
  const leaseExpired = async (lease: string) =>
    ((await pool.query(`SELECT expires_at <= clock_timestamp() AS over FROM ${schema}.fenced_fences_leases WHERE name = $1`, [lease])).rows[0] as { over: boolean }).over;
  const electionMs: number[] = [];
  for (let i = 0; i < 5; i++) {
    const lease = `elect-${i}`;
    const guard = createPostgresGuard({ db: pool, resource: `elect-${i}`, schema, checkLease: lease });
    const old = leases.openLease(lease, 'old', 10_000);
    const next = leases.openLease(lease, 'next', 10_000);
    const first = await old.acquire(600, 10_000);
    if (!first.won) throw new Error('not granted');
    // The election-time advance, as a coordinator makes it: the writes then share the fence row (FOR
    // SHARE) instead of queueing behind the first one's insert of it.
    await guard.advance(first.token);
    let checked = 0;
    const open = Array.from({ length: 4 }, () =>
      guard.guardedWrite(first.token, async (client) => {
        checked++;
        await insert(client);
        await sleep(1000);
      }),
    );
    for (const write of open) write.catch(() => undefined); // awaited below
    while (checked < 4) await sleep(5); // every write holds the lease row
    while (!(await leaseExpired(lease))) await sleep(5); // and the lease has run out meanwhile
    const t = performance.now();
    let reply = await next.acquire(10_000, 10_000);
    while (!reply.won) reply = await next.acquire(10_000, 10_000);
    electionMs.push(performance.now() - t);
    await Promise.allSettled(open);
  }
  results['election ms after expiry, 4 writes of the old term open for 1 s (median / max)'] = [Math.round(median(electionMs)), Math.round(Math.max(...electionMs))];
  progress(`election with open writes: ${JSON.stringify(results['election ms after expiry, 4 writes of the old term open for 1 s (median / max)'])} ms (the writes end about 400 ms after the lease did)`);
} finally {
  await pool.query(`DROP SCHEMA ${schema} CASCADE`);
  await pool.end();
}
process.stdout.write(args.json ? `${JSON.stringify(results, null, 2)}\n` : `${Object.entries(results).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join('\n')}\n`);
