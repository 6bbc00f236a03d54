// A real MariaDB restarted, then frozen (SIGSTOP), in the middle of a stream of guarded writes, on a
// private server of its own (the run's shared MariaDB must not go down under the other tests). The
// process stays up (an unheard `error` would fail the run), every write either committed once or
// failed with GuardUnavailableError, a write that says nothing was applied left nothing behind, and
// writes go on once the server is back. A freeze breaks nothing: every write waiting on it commits
// when it wakes.
import { startMariadbServer, type MariadbServerProcess } from '@fenced/chaos';
import { createMysqlGuard } from '@fenced/consumer-guard/mysql';
import { expectStreamHeld, freezeUntilStuck, streamThroughFault, testMysqlUrl } from '#test-support';
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

describe.each(['mysql2 pool', 'kysely'] as const)('a MariaDB fault during writes over %s', (kind) => {
  /** Pools and a guard over a table of their own, with the ledger the writes insert into. */
  async function guardedLedger(table: string) {
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
    const write = (id: number) =>
      guard.guardedWrite(1n, async (trx) => {
        if (kind === 'kysely') await (trx as unknown as Kysely<Ledger>).insertInto(table as 'ledger').values({ id, token: '1' }).execute();
        else await (trx as PoolConnection).query(`INSERT INTO ${table} (id, token) VALUES (?, 1)`, [id]);
      });
    const present = async () => {
      const check = await mysql.createConnection({ uri: server.url });
      const [rows] = await check.query(`SELECT id FROM ${table}`);
      await check.end();
      return new Set((rows as Array<{ id: number }>).map((r) => r.id));
    };
    const end = async () => {
      await kysely.destroy();
      await promisePool.end();
    };
    return { write, present, end };
  }

  it('a restart leaves every write committed once or failed typed, and the stream goes on', async () => {
    const { write, present, end } = await guardedLedger(kind === 'kysely' ? 'restart_k' : 'restart_p');
    const stream = await streamThroughFault(write, () => server.restart());
    expectStreamHeld(stream, await present());
    // The restart did hit the stream: some writes failed closed across it.
    expect([...stream.outcomes.values()].some((o) => o !== 'committed')).toBe(true);
    await end();
  });

  it('a freeze holds every write in flight until the server wakes, then each commits, and the stream goes on', async () => {
    const { write, present, end } = await guardedLedger(kind === 'kysely' ? 'freeze_k' : 'freeze_p');
    const stream = await streamThroughFault(write, (writers) => freezeUntilStuck(server, writers));
    expectStreamHeld(stream, await present());
    expect([...stream.outcomes.values()].filter((o) => o !== 'committed')).toEqual([]);
    await end();
  });
});

it("a server of a test's own, installed, started and restarted, leaves the run's MariaDB's temporary tables alone", async () => {
  // A MariaDB deletes every `#sql*` file of its tmpdir when it starts (as its own leftovers): in a
  // shared /tmp, the live temporary tables of every other server on the machine.
  const run = await mysql.createConnection({ uri: testMysqlUrl() });
  try {
    await run.query('CREATE TEMPORARY TABLE held_across (x INT) ENGINE = Aria');
    await run.query('INSERT INTO held_across VALUES (1)');
    const another = await startMariadbServer();
    await another.stop();
    await server.restart();
    await run.query('INSERT INTO held_across VALUES (2)');
    const [rows] = await run.query('SELECT x FROM held_across ORDER BY x');
    expect(rows).toEqual([{ x: 1 }, { x: 2 }]);
    await run.query('DROP TEMPORARY TABLE held_across');
  } finally {
    await run.end();
  }
});

it('a restart whose port another MariaDB took while it was down fails, naming that server, rather than going on with it', async () => {
  await server.shutdown();
  // Another process's pick, say, takes the port meanwhile, and its server answers queries there.
  const other = await startMariadbServer({ port: server.port });
  try {
    // Either check may come first: this server's exit (it cannot bind), or the answer from the other
    // server compared with the process listening. Never a start that resolves.
    await expect(server.start()).rejects.toThrow(new RegExp(`^(port ${server.port} is answered by another process \\(pid \\d+\\), not the mariadbd started|mariadbd exited at start)`));
  } finally {
    await other.stop();
  }
  await server.start();
  expect(server.running).toBe(true);
});
