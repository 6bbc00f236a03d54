/**
 * A short tour of the PostgreSQL guard against the local database: two leaders write to the same
 * ledger, the old one wakes up after the new one took over, and its write is refused.
 *
 *   pnpm example            (DATABASE_URL, or postgres://postgres@127.0.0.1:5432/test)
 */
import { randomBytes } from 'node:crypto';
import { Kysely, PostgresDialect, type Generated } from 'kysely';
import pg from 'pg';
import { isFencedError } from '@fenced/shared';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';

interface DB {
  invoices: { id: Generated<number>; customer: string; amount_cents: number; token: string };
}

const databaseUrl = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `example_${randomBytes(3).toString('hex')}`;
const pool = new pg.Pool({ connectionString: databaseUrl, options: `-c search_path=${schema}` });
// An idle client whose server goes away (a restart, a failover) emits `error` on the pool: without a
// listener that ends the process. The pool drops that client and connects a new one when asked.
pool.on('error', (err) => process.stderr.write(`pool: ${err.message}\n`));
const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
const say = (line: string) => process.stdout.write(`${line}\n`);

async function main(): Promise<void> {
  await pool.query(`CREATE SCHEMA ${schema}`);
  try {
    await pool.query(`CREATE TABLE invoices (id serial PRIMARY KEY, customer text NOT NULL, amount_cents int NOT NULL, token bigint NOT NULL)`);
    const guard = createPostgresGuard({ db, pool, resource: 'billing', schema });
    await guard.migrate();

    const invoice = (customer: string, token: bigint) =>
      guard.guardedWrite(token, (trx) =>
        trx.insertInto('invoices').values({ customer, amount_cents: 4200, token: token.toString() }).returning('id').executeTakeFirstOrThrow(),
      );

    say('leader A (token 7) writes two invoices');
    await invoice('acme', 7n);
    await invoice('globex', 7n);
    say('leader A pauses; its lease expires; leader B is elected with token 8 and writes');
    await invoice('initech', 8n);
    say('leader A wakes up, still believing it leads, and tries to write with token 7');
    try {
      await invoice('umbrella', 7n);
      say('  accepted: this must never happen');
      process.exitCode = 1;
    } catch (err) {
      if (!isFencedError(err, 'STALE_TOKEN')) throw err;
      say(`  refused: ${err.message}`);
    }
    const rows = await db.selectFrom('invoices').select(['id', 'customer', 'token']).orderBy('id').execute();
    say(`invoices committed: ${rows.map((r) => `${r.customer}@${r.token}`).join(', ')}`);
    say(`fence for "billing": ${await guard.highest()}`);
  } finally {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await db.destroy();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`example failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
