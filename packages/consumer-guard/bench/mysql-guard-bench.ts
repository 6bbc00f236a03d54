/**
 * The MySQL/MariaDB half of `pnpm bench:guard`: guarded vs unguarded write throughput on InnoDB, side
 * by side in one run, beside the floor of the design (a locking read of the fence row inside the
 * write's own transaction).
 *
 * The server: `MYSQL_URL`, else a private MariaDB started on a free loopback port (Debian's
 * mariadb-server) and removed at the end. mysql2 sends one statement per round trip, so every case
 * states its round trips: the unguarded transaction is START, INSERT, COMMIT (three); the floor and
 * the guard add the read or the check (four). The ratio against the floor is the guard's own cost.
 *
 * Flags: --seconds S (one slice, default 1), --rounds R (pairs of slices per comparison, default 10),
 * --clients N (default 8), --json.
 */
import { parseArgs } from 'node:util';
import mysql from 'mysql2/promise';
import { createMysqlGuard } from '@fenced/consumer-guard/mysql';
import { startMariadbServer, type MariadbServerProcess } from '@fenced/chaos';

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

type Worker = (client: number) => Promise<unknown>;

async function measure(worker: Worker, forSeconds: number): Promise<number> {
  const started = performance.now();
  const deadline = started + forSeconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      while (performance.now() < deadline) {
        await worker(c);
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

async function main(): Promise<void> {
  let server: MariadbServerProcess | undefined;
  let url = process.env['MYSQL_URL'];
  if (url === undefined) {
    server = await startMariadbServer();
    url = server.url;
  }
  const pool = mysql.createPool({ uri: url, connectionLimit: clients + 2 });
  const version = String(((await pool.query('SELECT VERSION() AS v'))[0] as Array<{ v: string }>)[0]!.v);
  const database = `bench_${process.pid}`;
  await pool.query(`CREATE DATABASE ${database}`);
  await pool.end();
  const db = mysql.createPool({ uri: url.replace(/\/[^/]*$/, `/${database}`), connectionLimit: clients + 2 });
  try {
    await db.query('CREATE TABLE ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, resource VARCHAR(64) NOT NULL, token BIGINT NOT NULL) ENGINE = InnoDB');
    await db.query('CREATE TABLE invoices (id BIGINT AUTO_INCREMENT PRIMARY KEY, token BIGINT NOT NULL, amount INT NOT NULL) ENGINE = InnoDB');
    await db.query('CREATE TABLE invoice_lines (id BIGINT AUTO_INCREMENT PRIMARY KEY, invoice_id BIGINT NOT NULL, sku VARCHAR(8) NOT NULL, cents INT NOT NULL) ENGINE = InnoDB');
    await db.query('CREATE TABLE balances (account INT PRIMARY KEY, cents BIGINT NOT NULL) ENGINE = InnoDB');
    await db.query(`INSERT INTO balances (account, cents) VALUES ${Array.from({ length: 64 }, (_, i) => `(${i + 1}, 0)`).join(', ')}`);
    const guard = createMysqlGuard({ db, resource: 'same' });
    const invoiceGuard = createMysqlGuard({ db, resource: 'invoice' });
    await guard.migrate();
    await guard.guardedWrite(7n, async () => undefined); // the fence row the floors read

    type Conn = mysql.PoolConnection;
    const insert = (c: Conn | mysql.Pool, resource: string) => c.query('INSERT INTO ledger (resource, token) VALUES (?, 7)', [resource]);
    const invoice = async (c: Conn) => {
      const [result] = await c.query('INSERT INTO invoices (token, amount) VALUES (7, 10)');
      const id = (result as { insertId: number }).insertId;
      await c.query('INSERT INTO invoice_lines (invoice_id, sku, cents) VALUES (?, ?, ?), (?, ?, ?)', [id, 'a', 10, id, 'b', 20]);
      await c.query('UPDATE balances SET cents = cents + 30 WHERE account = ?', [(id % 64) + 1]);
      await c.query('SELECT cents FROM balances WHERE account = ?', [(id % 64) + 1]);
    };
    const inTransaction = async (first: string | null, body: (c: Conn) => Promise<unknown>) => {
      const c = await db.getConnection();
      try {
        await c.query('START TRANSACTION');
        if (first !== null) await c.query(first);
        await body(c);
        await c.query('COMMIT');
      } finally {
        c.release();
      }
    };
    const cases: Record<string, Worker> = {
      'unguarded one-resource': () => inTransaction(null, (c) => insert(c, 'same')),
      'floor: SELECT 1 first': () => inTransaction('SELECT 1', (c) => insert(c, 'same')),
      'floor: fence row LOCK IN SHARE MODE': () => inTransaction("SELECT token FROM fenced_fences WHERE resource = 'same' LOCK IN SHARE MODE", (c) => insert(c, 'same')),
      'the check procedure by hand': () => inTransaction("CALL fenced_fences_check('same', 7, false, NULL)", (c) => insert(c, 'same')),
      'same-token one-resource': () => guard.guardedWrite(7n, (c) => insert(c, 'same')),
      'unguarded invoice': () => inTransaction(null, invoice),
      'same-token invoice': () => invoiceGuard.guardedWrite(7n, (c) => invoice(c)),
    };
    const comparisons = [
      { name: 'floor SELECT 1 (a round trip)', guarded: 'floor: SELECT 1 first', baseline: 'unguarded one-resource' },
      { name: 'floor LOCK IN SHARE MODE', guarded: 'floor: fence row LOCK IN SHARE MODE', baseline: 'unguarded one-resource' },
      { name: 'check procedure by hand', guarded: 'the check procedure by hand', baseline: 'unguarded one-resource' },
      { name: 'same-token one-resource', guarded: 'same-token one-resource', baseline: 'unguarded one-resource' },
      { name: 'guard over floor LOCK IN SHARE MODE', guarded: 'same-token one-resource', baseline: 'floor: fence row LOCK IN SHARE MODE' },
      { name: 'same-token invoice', guarded: 'same-token invoice', baseline: 'unguarded invoice' },
    ];
    await invoiceGuard.guardedWrite(7n, async () => undefined);
    for (const worker of Object.values(cases)) await measure(worker, 0.3);
    const tps = new Map<string, number[]>();
    const ratios = new Map<string, number[]>();
    for (const { name, guarded, baseline } of comparisons) {
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 === 0 ? [baseline, guarded] : [guarded, baseline];
        const got: Record<string, number> = {};
        for (const c of order) got[c] = await measure(cases[c]!, seconds);
        for (const c of order) tps.set(c, [...(tps.get(c) ?? []), got[c]!]);
        ratios.set(name, [...(ratios.get(name) ?? []), got[guarded]! / got[baseline]!]);
      }
      if (!args.json) process.stderr.write(`${name}: ${ratios.get(name)!.map((x) => x.toFixed(2)).join(' ')}\n`);
    }
    const medianTps = Object.fromEntries([...tps].map(([k, v]) => [k, Math.round(median(v))]));
    const medianRatios = Object.fromEntries([...ratios].map(([k, v]) => [k, Math.round(median(v) * 100) / 100]));
    if (args.json) {
      process.stdout.write(`${JSON.stringify({ server: version, clients, seconds, pairs: rounds, tps: medianTps, ratios: medianRatios }, null, 2)}\n`);
      return;
    }
    process.stdout.write(`guard benchmark on ${version}: ${clients} clients, ${rounds} pairs of ${seconds}s slices per comparison, median tx/s\n`);
    for (const [name, value] of Object.entries(medianTps)) process.stdout.write(`  ${name.padEnd(38)} ${String(value).padStart(8)} tx/s\n`);
    for (const [name, value] of Object.entries(medianRatios)) process.stdout.write(`ratio ${name}: ${value.toFixed(2)}\n`);
    const floor = medianRatios['floor LOCK IN SHARE MODE'];
    const guardRatio = medianRatios['same-token one-resource'];
    if (floor !== undefined && guardRatio !== undefined) {
      process.stdout.write(`target one insert: guard ${guardRatio.toFixed(2)} >= floor LOCK IN SHARE MODE ${floor.toFixed(2)} - 0.03 = ${(floor - 0.03).toFixed(2)}: ${guardRatio >= floor - 0.03 ? 'met' : 'not met'}\n`);
    }
    const inv = medianRatios['same-token invoice'];
    if (inv !== undefined) process.stdout.write(`target invoice: guard ${inv.toFixed(2)} >= 0.90: ${inv >= 0.9 ? 'met' : 'not met'}\n`);
  } finally {
    await db.query(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined);
    await db.end();
    await server?.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:guard (MySQL) failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
