/**
 * A scheduler on PostgreSQL alone, as the READMEs write it: leases in PostgreSQL (`postgresLeases`
 * over a plain pg.Pool), the guard beside them, a job whose handler is the wrapped handler. No
 * ioredis and no kysely installed, compiled with `exactOptionalPropertyTypes` and `skipLibCheck:
 * false`, so a declaration file that imports an optional peer, or an option type a pg.Pool does not
 * fit, fails the install test. The first dispatch fails (the handler throws once); the scheduler
 * dispatches the fire again and it takes effect once. Prints one JSON line.
 *
 * Env: DATABASE_URL, SUFFIX.
 */
import { createCoordinator, createScheduler, parseFireId } from '@fenced/coordinator';
import { postgresLeases } from '@fenced/coordinator/postgres';
import { createGuard } from '@fenced/consumer-guard';
import pg from 'pg';

const suffix = process.env['SUFFIX'] ?? '';
if (!/^[a-z0-9_]+$/.test(suffix)) throw new Error('SUFFIX is required (a-z 0-9 _)');
const schema = `install_leases_${suffix}`;
const pool = new pg.Pool({ connectionString: process.env['DATABASE_URL'], max: 4 });
pool.on('error', () => {}); // an idle client's server went away: not fatal

await pool.query(`CREATE SCHEMA ${schema}`);
try {
  await pool.query(`CREATE TABLE ${schema}.ledger (fire_id text PRIMARY KEY, token bigint NOT NULL)`);
  const leases = postgresLeases({ pool, schema });
  await leases.migrate();
  const guard = createGuard({ db: pool, resource: 'ledger', schema, checkLease: 'billing' });
  await guard.migrate();
  let calls = 0;
  const handle = guard.wrapHandler(async (_payload, ctx) => {
    if (++calls === 1) throw new Error('the first dispatch fails');
    await ctx.guardedWrite((client: pg.PoolClient) => client.query(`INSERT INTO ${schema}.ledger VALUES ($1, $2)`, [ctx.fireId, ctx.token.toString()]));
  });
  const coordinator = createCoordinator({ store: leases, lease: 'billing', ttlMs: 3000, renewIntervalMs: 1000, fences: [guard] });
  const scheduler = createScheduler({ coordinator, jobs: { invoices: { everyMs: 200, handler: (envelope) => handle(envelope) } } });
  const failed: number[] = [];
  scheduler.on('fire.failed', (event) => failed.push(event.attempt));
  scheduler.start();
  await coordinator.start();
  const deadline = Date.now() + 30_000;
  let rows: Array<{ fire_id: string }> = [];
  while (rows.length < 3 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    rows = (await pool.query<{ fire_id: string }>(`SELECT fire_id FROM ${schema}.ledger ORDER BY fire_id`)).rows;
  }
  await scheduler.stop();
  await coordinator.stop();
  // The fire whose first dispatch failed is the first applied: none was skipped.
  const times = rows.map((row) => parseFireId(row.fire_id)!.scheduledAt);
  const consecutive = times.every((at, i) => i === 0 || at - times[i - 1]! === 200);
  process.stdout.write(`${JSON.stringify({ ok: rows.length >= 3 && consecutive, applied: rows.length, failed })}\n`);
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
}
