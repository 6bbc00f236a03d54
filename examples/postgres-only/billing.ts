/**
 * fenced with nothing but PostgreSQL: two replicas of a billing scheduler elect a leader on a lease
 * row beside the guard's fences, the leader writes one invoice per fire (each write checks, in its own
 * transaction, that its token still holds the lease), then hands over to the other replica; last,
 * the deposed leader's token tries to write again and is refused.
 *
 *   pnpm example:postgres-only     (DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test, else a
 *                                   throwaway PostgreSQL of its own: see database.ts)
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createCoordinator, createScheduler } from '@fenced/coordinator';
import { postgresLeases } from '@fenced/coordinator/postgres';
import { createGuard } from '@fenced/consumer-guard';
import { isFencedError } from '@fenced/shared';
import { quickStartDatabase, QuickStartDatabaseError } from './database.js';

const schema = `postgres_only_${randomBytes(3).toString('hex')}`;
const say = (line: string) => process.stdout.write(`${line}\n`);

/** One replica: its own pool, lease store, guard, coordinator and scheduler, as its own process would have. */
function replica(databaseUrl: string, name: string) {
  const pool = new pg.Pool({ connectionString: databaseUrl, options: `-c search_path=${schema}`, max: 4 });
  pool.on('error', () => {});
  const leases = postgresLeases({ pool, schema });
  const guard = createGuard({ db: pool, resource: 'invoices', schema, checkLease: 'billing' });
  const coordinator = createCoordinator({ store: leases, lease: 'billing', nodeId: name, ttlMs: 3000, renewIntervalMs: 1000, fences: [guard] });
  const invoice = guard.wrapHandler(async (_payload, ctx) => {
    await ctx.guardedWrite((client) => (client as pg.PoolClient).query('INSERT INTO invoices (fire_id, node, token) VALUES ($1, $2, $3)', [ctx.fireId, name, ctx.token]));
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

async function main(databaseUrl: string): Promise<void> {
  const setup = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  // An idle client whose server goes away (a restart; the throwaway server stopping) emits `error` on
  // its pool: without a listener that ends the process.
  setup.on('error', () => {});
  await setup.query(`CREATE SCHEMA ${schema}`);
  const [a, b] = [replica(databaseUrl, 'replica-a'), replica(databaseUrl, 'replica-b')];
  try {
    await setup.query(`CREATE TABLE ${schema}.invoices (fire_id text PRIMARY KEY, node text NOT NULL, token bigint NOT NULL)`);
    await a.guard.migrate();
    await a.leases.migrate();
    const invoices = async () => Number((await setup.query(`SELECT count(*)::int AS n FROM ${schema}.invoices`)).rows[0].n);

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
      await a.guard.guardedWrite(deposed, (client) => (client as pg.PoolClient).query('INSERT INTO invoices (fire_id, node, token) VALUES ($1, $2, $3)', ['late', 'replica-a', deposed]));
      throw new Error('the deposed leader wrote');
    } catch (err) {
      if (!isFencedError(err)) throw err;
      say(`the deposed leader's write (token ${deposed}) was refused: ${err.code}`);
    }
    const byNode = (await setup.query(`SELECT node, count(*)::int AS n, min(token)::text AS token FROM ${schema}.invoices GROUP BY node ORDER BY node`)).rows;
    say(`invoices: ${byNode.map((r) => `${r.node} ${r.n} (token ${r.token})`).join(', ')}; no Redis anywhere`);
  } finally {
    await b.scheduler.stop();
    await b.coordinator.stop();
    await a.scheduler.stop();
    await a.coordinator.stop();
    await Promise.all([a.pool.end(), b.pool.end()]);
    await setup.query(`DROP SCHEMA ${schema} CASCADE`).finally(() => setup.end());
  }
}

let database: Awaited<ReturnType<typeof quickStartDatabase>>;
try {
  database = await quickStartDatabase(say);
} catch (err) {
  if (!(err instanceof QuickStartDatabaseError)) throw err;
  process.stderr.write(`example: ${err.message}\n`);
  process.exit(2);
}
try {
  await main(database.url);
} finally {
  await database.close();
}
