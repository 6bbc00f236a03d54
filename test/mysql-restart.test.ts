// A real MariaDB restart in the middle of a stream of guarded writes, on a private server of its own
// (the run's shared MariaDB must not go down under the other tests). The process stays up (an
// unheard `error` would fail the run), every write either committed once or failed with
// GuardUnavailableError, a write that says nothing was applied left nothing behind, and writes go on
// once the server is back.
import { isFencedError } from '@fenced/shared';
import { startMariadbServer, type MariadbServerProcess } from '@fenced/chaos';
import { createMysqlGuard } from '@fenced/consumer-guard/mysql';
import { waitFor } from '#test-support';
import { Kysely, MysqlDialect } from 'kysely';
import mysqlCallbacks from 'mysql2';
import mysql, { type PoolConnection } from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let server: MariadbServerProcess;
beforeAll(async () => {
  server = await startMariadbServer();
});
afterAll(async () => {
  await server?.stop();
});

interface Ledger {
  ledger: { id: number; token: string };
}

type Outcome = 'committed' | 'nothing applied' | 'outcome unknown';

describe.each(['mysql2 pool', 'kysely'] as const)('a MariaDB restart during writes over %s', (kind) => {
  it('leaves every write committed once or failed typed, and the stream goes on', async () => {
    const table = kind === 'kysely' ? 'ledger_k' : 'ledger_p';
    const admin = await mysql.createConnection({ uri: server.url });
    await admin.query(`CREATE TABLE ${table} (id INT PRIMARY KEY, token BIGINT NOT NULL) ENGINE = InnoDB`);
    await admin.end();
    // No error listener of our own on either pool: the guard must be the one that listens.
    const promisePool = mysql.createPool({ uri: server.url, connectionLimit: 4 });
    const callbackPool = mysqlCallbacks.createPool({ uri: server.url, connectionLimit: 4 });
    const kysely = new Kysely<Ledger>({ dialect: new MysqlDialect({ pool: callbackPool }) });
    const guard =
      kind === 'kysely'
        ? createMysqlGuard({ db: kysely, pool: callbackPool, resource: `stream-${table}`, table: `fences_${table}` })
        : createMysqlGuard({ db: promisePool, resource: `stream-${table}`, table: `fences_${table}` });
    await guard.migrate();

    const outcomes = new Map<number, Outcome>();
    let next = 0;
    let restarted = false;
    let committedAfterRestart = 0;
    const unexpected: unknown[] = [];
    const writeOne = async (id: number) => {
      try {
        await guard.guardedWrite(1n, async (trx) => {
          if (kind === 'kysely') await (trx as unknown as Kysely<Ledger>).insertInto(table as 'ledger').values({ id, token: '1' }).execute();
          else await (trx as PoolConnection).query(`INSERT INTO ${table} (id, token) VALUES (?, 1)`, [id]);
        });
        outcomes.set(id, 'committed');
        if (restarted) committedAfterRestart++;
      } catch (err) {
        if (!isFencedError(err, 'GUARD_UNAVAILABLE')) {
          unexpected.push(err);
          return;
        }
        outcomes.set(id, (err as Error).message.includes('outcome is unknown') ? 'outcome unknown' : 'nothing applied');
        // The server is down for a moment: do not spin through ids while it is.
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    const deadline = performance.now() + 45_000;
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
    // The restart did hit the stream: some writes failed closed across it.
    expect([...outcomes.values()].some((o) => o !== 'committed')).toBe(true);
    const check = await mysql.createConnection({ uri: server.url });
    const [rows] = await check.query(`SELECT id FROM ${table}`);
    await check.end();
    const present = new Set((rows as Array<{ id: number }>).map((r) => r.id));
    for (const [id, outcome] of outcomes) {
      if (outcome === 'committed') expect(present.has(id), `write ${id} committed but is missing`).toBe(true);
      if (outcome === 'nothing applied') expect(present.has(id), `write ${id} said nothing was applied but is present`).toBe(false);
    }
    for (const id of present) expect(outcomes.has(id), `row ${id} was never written`).toBe(true);
    await kysely.destroy();
    await promisePool.end();
  });
});
