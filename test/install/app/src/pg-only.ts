/**
 * A consumer service on PostgreSQL alone (no Redis, no Kysely installed): the guard over a pg.Pool.
 * Compiled with `skipLibCheck: false`, so a declaration file that imports an optional peer the
 * project lacks fails the install test. Prints one JSON line.
 *
 * Env: DATABASE_URL, SUFFIX.
 */
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { createGuard } from '@fenced/consumer-guard';
import { isFencedError } from '@fenced/shared';
import pg from 'pg';

const suffix = process.env['SUFFIX'] ?? '';
if (!/^[a-z0-9_]+$/.test(suffix)) throw new Error('SUFFIX is required (a-z 0-9 _)');
const schema = `install_${suffix}`;
const pool = new pg.Pool({ connectionString: process.env['DATABASE_URL'], max: 2 });

try {
  await pool.query(`CREATE SCHEMA ${schema}`);
  await pool.query(`CREATE TABLE ${schema}.ledger (id serial PRIMARY KEY, token bigint NOT NULL)`);
  const guard = createGuard({ db: pool, resource: 'ledger', schema });
  await guard.migrate();
  // The client is typed as pg's own PoolClient: the query below type-checks against @types/pg.
  const inserted: number = await guard.guardedWrite(7n, async (client: pg.PoolClient) => {
    const result = await client.query<{ id: number }>(`INSERT INTO ${schema}.ledger (token) VALUES ($1) RETURNING id`, ['7']);
    return result.rows[0]!.id;
  });
  let refused = false;
  try {
    await createPostgresGuard({ db: pool, resource: 'ledger', schema }).guardedWrite(6n, async () => undefined);
  } catch (err) {
    refused = isFencedError(err, 'STALE_TOKEN') && err.highest === 7n;
  }
  if (!refused) throw new Error('token 6 was not refused after 7');
  process.stdout.write(`${JSON.stringify({ ok: true, inserted, refused })}\n`);
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
}
