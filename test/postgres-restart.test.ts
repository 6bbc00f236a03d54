// A real PostgreSQL restart in the middle of a stream of guarded writes, on a private server (the
// shared one must not go down under the other tests). The process stays up (an unheard `error` would
// fail the run), every write either committed once or failed with GuardUnavailableError, a write that
// says nothing was applied left nothing behind, and writes go on once the server is back.
import { isFencedError, type FencedEvent } from '@fenced/shared';
import { startPostgresServer, type PostgresServerProcess } from '@fenced/chaos';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { kyselyOver, waitFor } from '#test-support';
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

type Outcome = 'committed' | 'nothing applied' | 'outcome unknown';

describe.each(['kysely', 'pg.Pool'] as const)('a PostgreSQL restart during writes over %s', (kind) => {
  it('leaves every write committed once or failed typed, and the stream goes on', async () => {
    const schema = `restart_${kind === 'kysely' ? 'k' : 'p'}`;
    // No pool.on('error'): the guard must be the one that listens.
    const pool = new pg.Pool({ connectionString: server.url, max: 4, options: `-c search_path=${schema}` });
    const events: FencedEvent[] = [];
    const logger = (e: FencedEvent) => void events.push(e);
    const guard =
      kind === 'kysely'
        ? createPostgresGuard({ db: kyselyOver(pool), pool, resource: 'stream', schema, logger })
        : createPostgresGuard({ db: pool, resource: 'stream', schema, logger });
    await pool.query(`CREATE SCHEMA ${schema}`);
    await pool.query(`CREATE TABLE ${schema}.ledger (id integer PRIMARY KEY, token bigint NOT NULL)`);
    await guard.migrate();

    const outcomes = new Map<number, Outcome>();
    let next = 0;
    let restarted = false;
    let committedAfterRestart = 0;
    const unexpected: unknown[] = [];

    const writeOne = async (id: number) => {
      try {
        await guard.guardedWrite(1n, async (trx) => {
          const text = 'INSERT INTO ledger (id, token) VALUES ($1, 1)';
          if (kind === 'pg.Pool') await (trx as pg.PoolClient).query(text, [id]);
          else await (trx as unknown as Kysely<Ledger>).insertInto('ledger').values({ id, token: '1' }).execute();
        });
        outcomes.set(id, 'committed');
        if (restarted) committedAfterRestart++;
      } catch (err) {
        if (!isFencedError(err, 'GUARD_UNAVAILABLE')) {
          unexpected.push(err);
          return;
        }
        outcomes.set(id, (err as Error).message.includes('outcome is unknown') ? 'outcome unknown' : 'nothing applied');
      }
    };
    // Four writers, each writing until the stream has gone on well past the restart (bounded).
    const deadline = performance.now() + 30_000;
    const writer = async () => {
      while (committedAfterRestart < 40 && performance.now() < deadline) await writeOne(++next);
    };
    const writers = Promise.all([writer(), writer(), writer(), writer()]);
    await waitFor(() => [...outcomes.values()].filter((o) => o === 'committed').length >= 40, 20_000);
    await server.restart();
    restarted = true;
    await writers;

    expect(unexpected).toEqual([]);
    expect(committedAfterRestart).toBeGreaterThanOrEqual(40);
    const { rows } = await pool.query<{ id: number }>(`SELECT id FROM ${schema}.ledger`);
    const present = new Set(rows.map((r) => r.id));
    for (const [id, outcome] of outcomes) {
      if (outcome === 'committed') expect(present.has(id), `write ${id} committed but is missing`).toBe(true);
      if (outcome === 'nothing applied') expect(present.has(id), `write ${id} said nothing was applied but is present`).toBe(false);
    }
    for (const id of present) expect(outcomes.has(id), `row ${id} was never written`).toBe(true);
    await pool.end();
  });
});
