// A real PostgreSQL restarted, then frozen (SIGSTOP), in the middle of a stream of guarded writes, on
// a private server (the shared one must not go down under the other tests). The process stays up (an
// unheard `error` would fail the run), every write either committed once or failed with
// GuardUnavailableError, a write that says nothing was applied left nothing behind, and writes go on
// once the server is back. A freeze breaks nothing: every write waiting on it commits when it wakes.
import { startPostgresServer, type PostgresServerProcess } from '@fenced/chaos';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { expectStreamHeld, freezeUntilStuck, kyselyOver, streamThroughFault } from '#test-support';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let server: PostgresServerProcess;
beforeAll(async () => {
  server = await startPostgresServer();
});
afterAll(async () => {
  await server?.stop();
});

interface Ledger {
  ledger: { id: number; token: string };
}

describe.each(['kysely', 'pg.Pool'] as const)('a PostgreSQL fault during writes over %s', (kind) => {
  /** A pool and a guard over a schema of their own, with the ledger the writes insert into. */
  async function guardedLedger(schema: string) {
    // No pool.on('error'): the guard must be the one that listens.
    const pool = new pg.Pool({ connectionString: server.url, max: 4, options: `-c search_path=${schema}` });
    const guard =
      kind === 'kysely' ? createPostgresGuard({ db: kyselyOver(pool), pool, resource: 'stream', schema }) : createPostgresGuard({ db: pool, resource: 'stream', schema });
    await pool.query(`CREATE SCHEMA ${schema}`);
    await pool.query(`CREATE TABLE ${schema}.ledger (id integer PRIMARY KEY, token bigint NOT NULL)`);
    await guard.migrate();
    const write = (id: number) =>
      guard.guardedWrite(1n, async (trx) => {
        const text = 'INSERT INTO ledger (id, token) VALUES ($1, 1)';
        if (kind === 'pg.Pool') await (trx as pg.PoolClient).query(text, [id]);
        else await (trx as unknown as Kysely<Ledger>).insertInto('ledger').values({ id, token: '1' }).execute();
      });
    const present = async () => new Set((await pool.query<{ id: number }>(`SELECT id FROM ${schema}.ledger`)).rows.map((r) => r.id));
    return { pool, write, present };
  }

  it('a restart leaves every write committed once or failed typed, and the stream goes on', async () => {
    const { pool, write, present } = await guardedLedger(`restart_${kind === 'kysely' ? 'k' : 'p'}`);
    const stream = await streamThroughFault(write, () => server.restart());
    expectStreamHeld(stream, await present());
    // The restart did hit the stream: some writes failed closed across it.
    expect([...stream.outcomes.values()].some((o) => o !== 'committed')).toBe(true);
    await pool.end();
  });

  it('a freeze holds every write in flight until the server wakes, then each commits, and the stream goes on', async () => {
    const { pool, write, present } = await guardedLedger(`freeze_${kind === 'kysely' ? 'k' : 'p'}`);
    const stream = await streamThroughFault(write, (writers) => freezeUntilStuck(server, writers));
    expectStreamHeld(stream, await present());
    expect([...stream.outcomes.values()].filter((o) => o !== 'committed')).toEqual([]);
    await pool.end();
  });
});
