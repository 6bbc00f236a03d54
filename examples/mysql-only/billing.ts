/**
 * fenced with nothing but MySQL/MariaDB: two replicas of a billing scheduler elect a leader on a
 * lease row beside the guard's fences, the leader writes one invoice per fire (each write checks, in
 * its own transaction, the fence and that its token still holds the lease), then hands over to the
 * other replica; last, the deposed leader's token tries to write again and is refused.
 *
 *   pnpm example:mysql-only     (MYSQL_URL, else mysql://root@127.0.0.1:3306/test)
 */
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { createCoordinator, createScheduler } from '@fenced/coordinator';
import { mysqlLeases } from '@fenced/coordinator/mysql';
import { createGuard } from '@fenced/consumer-guard';
import { mysqlFences } from '@fenced/consumer-guard/mysql';
import { isFencedError } from '@fenced/shared';

const say = (line: string) => process.stdout.write(`${line}\n`);
const url = process.env['MYSQL_URL'] || 'mysql://root@127.0.0.1:3306/test';
const source = process.env['MYSQL_URL'] ? 'MYSQL_URL' : 'the local default';
/** The database the example makes for itself, and drops at the end. */
const database = `mysql_only_${randomBytes(3).toString('hex')}`;

/** One replica: its own pool, lease store, guard, coordinator and scheduler, as its own process would have. */
function replica(name: string) {
  const pool = mysql.createPool({ uri: url, database, connectionLimit: 4 });
  const leases = mysqlLeases({ pool });
  const guard = createGuard({ store: mysqlFences({ db: pool, checkLease: 'billing' }), resource: 'invoices' });
  const coordinator = createCoordinator({ store: leases, lease: 'billing', nodeId: name, ttlMs: 3000, renewIntervalMs: 1000, fences: [guard] });
  const invoice = guard.wrapHandler(async (_payload, ctx) => {
    await ctx.guardedWrite((connection) => connection.query('INSERT INTO invoices (fire_id, node, token) VALUES (?, ?, ?)', [ctx.fireId, name, ctx.token.toString()]));
  });
  const scheduler = createScheduler({ coordinator, jobs: { invoices: { everyMs: 500, handler: (envelope) => invoice(envelope) } } });
  coordinator.on('elected', ({ token }) => say(`${name}: elected, token ${token}`));
  return { name, pool, leases, guard, coordinator, scheduler };
}

const waitFor = async (predicate: () => boolean | Promise<boolean>, what: string) => {
  const deadline = Date.now() + 20_000;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within 20 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

async function main(setup: mysql.Connection): Promise<void> {
  await setup.query(`CREATE DATABASE ${database}`);
  await setup.query(`CREATE TABLE ${database}.invoices (fire_id VARCHAR(255) PRIMARY KEY, node VARCHAR(64) NOT NULL, token BIGINT NOT NULL) ENGINE = InnoDB`);
  const [a, b] = [replica('replica-a'), replica('replica-b')];
  try {
    await a.guard.migrate();
    await a.leases.migrate();
    const invoices = async () => Number(((await setup.query(`SELECT COUNT(*) AS n FROM ${database}.invoices`))[0] as Array<{ n: number }>)[0]!.n);

    a.scheduler.start();
    await a.coordinator.start();
    await waitFor(() => a.coordinator.isLeader(), 'replica-a leads');
    b.scheduler.start();
    await b.coordinator.start();
    await waitFor(async () => (await invoices()) >= 3, 'three invoices');
    const deposed = a.coordinator.token()!;
    say(`${await invoices()} invoices written by replica-a`);

    // A graceful handover: the scheduler first (its fires in flight finish while the lease is held).
    const handedAt = Date.now();
    await a.scheduler.stop();
    await a.coordinator.stop();
    await waitFor(() => b.coordinator.isLeader(), 'replica-b leads');
    say(`handover: replica-b leads ${Date.now() - handedAt} ms after replica-a stepped down`);
    const before = await invoices();
    await waitFor(async () => (await invoices()) >= before + 2, 'replica-b writes');

    // The deposed leader's token, late: refused in its own transaction, by the lease and the fence.
    try {
      await a.guard.guardedWrite(deposed, (connection) => connection.query('INSERT INTO invoices (fire_id, node, token) VALUES (?, ?, ?)', ['late', 'replica-a', deposed.toString()]));
      throw new Error('the deposed leader wrote');
    } catch (err) {
      if (!isFencedError(err)) throw err;
      say(`the deposed leader's write (token ${deposed}) was refused: ${err.code}`);
    }
    const [rows] = await setup.query(`SELECT node, COUNT(*) AS n, CAST(MIN(token) AS CHAR) AS token FROM ${database}.invoices GROUP BY node ORDER BY node`);
    const byNode = rows as Array<{ node: string; n: number; token: string }>;
    say(`invoices: ${byNode.map((r) => `${r.node} ${r.n} (token ${r.token})`).join(', ')}; nothing but MySQL/MariaDB`);
  } finally {
    await b.scheduler.stop();
    await b.coordinator.stop();
    await a.scheduler.stop();
    await a.coordinator.stop();
    await Promise.all([a.pool.end(), b.pool.end()]);
  }
}

/** The address without its password, for the first line. */
const shown = (() => {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return '(not a URL)';
  }
})();

let setup: mysql.Connection;
try {
  setup = await mysql.createConnection({ uri: url, connectTimeout: 5000 });
} catch (err) {
  process.stderr.write(`example: cannot use ${source} (${shown}): ${(err as Error).message || String((err as { code?: unknown }).code)}\n`);
  process.exit(2);
}
say(`using MySQL/MariaDB at ${source} (${shown})`);
try {
  await main(setup);
} finally {
  await setup.query(`DROP DATABASE IF EXISTS ${database}`).catch(() => undefined);
  await setup.end();
}
