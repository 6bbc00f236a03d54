// A killed backend, at every point of a guarded write, is the write's typed error: never an unheard
// `error` event (which kills the process: vitest fails the run on it), never a broken client handed
// out again, never a half-applied write. The pools here have no `error` listener of their own, as
// in an application that never thought of it.
import { isFencedError, type FencedEvent } from '@fenced/shared';
import { failpoints } from '@fenced/shared/failpoints';
import { caught, createPool, createTestSchema, kyselyOver, waitFor, waitForLockWait } from '#test-support';
import { CompiledQuery, type Kysely } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresGuard } from './index.js';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let admin: pg.Pool;

beforeAll(async () => {
  schema = await createTestSchema('connloss');
  admin = createPool({ max: 4 });
  await admin.query(`CREATE TABLE "${schema.name}".ledger (id text PRIMARY KEY, token bigint NOT NULL)`);
});
afterAll(async () => {
  await admin.end();
  await schema.drop();
});
afterEach(() => failpoints.disarm());

/** Ends a backend as an administrator, a restart or a timeout would, and waits until it is gone. */
async function terminate(pid: number): Promise<void> {
  await admin.query('SELECT pg_terminate_backend($1)', [pid]);
  await waitFor(async () => (await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rowCount === 0, 10_000);
}

const rowExists = async (id: string) => (await admin.query(`SELECT 1 FROM "${schema.name}".ledger WHERE id = $1`, [id])).rowCount === 1;

describe.each(['kysely', 'pg.Pool'] as const)('a killed connection over %s', (kind) => {
  let pool: pg.Pool;
  let events: FencedEvent[];
  let n = 0;
  const applicationName = `connloss-${kind}-${process.pid}`;

  // No pool.on('error') here: the guard must be the one that listens.
  beforeAll(() => {
    pool = new pg.Pool({ connectionString: schema.pool.options.connectionString, max: 3, application_name: applicationName, options: `-c search_path=${schema.name}` });
  });
  afterAll(async () => {
    await pool.end();
  });

  function makeGuard(resource: string) {
    events = [];
    const logger = (e: FencedEvent) => void events.push(e);
    return kind === 'kysely'
      ? createPostgresGuard({ db: kyselyOver(pool), pool, resource, schema: schema.name, logger })
      : createPostgresGuard({ db: pool, resource, schema: schema.name, logger });
  }

  const run = async (trx: unknown, text: string, values: unknown[] = []) =>
    kind === 'kysely' ? (await (trx as Kysely<unknown>).executeQuery(CompiledQuery.raw(text, values))).rows : (await (trx as pg.PoolClient).query(text, values)).rows;
  const backendPid = async (trx: unknown) => Number((await run(trx, 'SELECT pg_backend_pid() AS pid'))[0]!['pid' as never]);
  const insert = (trx: unknown, id: string, token: bigint) => run(trx, 'INSERT INTO ledger (id, token) VALUES ($1, $2)', [id, token.toString()]);

  /** After a loss, the guard still writes, on every client the pool has room for (none of them broken). */
  async function expectHealthy(guard: ReturnType<typeof makeGuard>, token: bigint): Promise<void> {
    const ids = [1, 2, 3].map(() => `ok-${kind}-${++n}`);
    await Promise.all(ids.map((id) => guard.guardedWrite(token, (trx) => insert(trx, id, token))));
    for (const id of ids) expect(await rowExists(id)).toBe(true);
  }

  function expectUnavailable(err: unknown): void {
    expect(isFencedError(err, 'GUARD_UNAVAILABLE'), `expected GuardUnavailableError, got ${String(err)}`).toBe(true);
  }

  let resourceCounter = 0;
  const nextResource = () => `conn-${kind}-${++resourceCounter}`;

  beforeAll(async () => {
    await makeGuard('setup').migrate();
  });

  it('idle in the pool: the error is heard, the pool drops the client, and the next write works', async () => {
    const guard = makeGuard(nextResource());
    await expectHealthy(guard, 1n);
    const { rows } = await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle'`, [applicationName]);
    expect(rows.length).toBeGreaterThan(0);
    for (const { pid } of rows) await terminate(pid);
    // Every killed client heard (and so dropped by the pool): one not yet heard could still be handed
    // out, and its write would fail, typed, before the pool learns it is dead.
    await waitFor(() => events.filter((e) => e.type === 'guard.connection-lost').length >= rows.length, 10_000);
    await expectHealthy(guard, 1n);
  });

  it('during the check (waiting on the fence row): GuardUnavailableError, nothing applied', async () => {
    const resource = nextResource();
    const guard = makeGuard(resource);
    await guard.guardedWrite(1n, async () => {});
    const holder = await admin.connect();
    const id = `check-${kind}-${++n}`;
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM "${schema.name}".fenced_fences WHERE resource = $1 FOR UPDATE`, [resource]);
    const write = caught(guard.guardedWrite(2n, (trx) => insert(trx, id, 2n)));
    try {
      await waitForLockWait(admin, `'${resource}'`);
      // Inside a guarded transaction the session's name carries the token first (000003.sql).
      const { rows } = await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name LIKE '%' || $1 AND wait_event_type = 'Lock'`, [applicationName]);
      expect(rows).toHaveLength(1);
      await terminate(rows[0]!.pid);
      expectUnavailable(await write);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
      await write.catch(() => {});
    }
    expect(await rowExists(id)).toBe(false);
    await expectHealthy(guard, 2n);
  });

  it('inside fn, which then queries: GuardUnavailableError (not the driver error), nothing applied', async () => {
    const guard = makeGuard(nextResource());
    const id = `fn-query-${kind}-${++n}`;
    const err = await caught(
      guard.guardedWrite(1n, async (trx) => {
        await insert(trx, id, 1n);
        await terminate(await backendPid(trx));
        await run(trx, 'SELECT 1');
      }),
    );
    expectUnavailable(err);
    // One connection lost, one report (the metric counts these).
    expect(events.filter((e) => e.type === 'guard.connection-lost')).toHaveLength(1);
    expect(await rowExists(id)).toBe(false);
    await expectHealthy(guard, 1n);
  });

  it('inside fn, which then returns without a query: GuardUnavailableError, nothing applied', async () => {
    const guard = makeGuard(nextResource());
    const id = `fn-return-${kind}-${++n}`;
    const err = await caught(
      guard.guardedWrite(1n, async (trx) => {
        await insert(trx, id, 1n);
        await terminate(await backendPid(trx));
      }),
    );
    expectUnavailable(err);
    expect(await rowExists(id)).toBe(false);
    await expectHealthy(guard, 1n);
  });

  it('between fn and the COMMIT: GuardUnavailableError, nothing applied', async () => {
    const guard = makeGuard(nextResource());
    const id = `precommit-${kind}-${++n}`;
    let pid = 0;
    // Killed while the write stands before its COMMIT, and resumed once the guard heard it (the
    // backend gone from pg_stat_activity does not yet mean this process has read its FATAL).
    failpoints.arm('guard.checked-before-commit', {
      kind: 'call',
      run: async () => {
        await terminate(pid);
        await waitFor(() => events.some((e) => e.type === 'guard.connection-lost'), 10_000);
      },
    });
    const err = await caught(
      guard.guardedWrite(1n, async (trx) => {
        pid = await backendPid(trx);
        await insert(trx, id, 1n);
      }),
    );
    expectUnavailable(err);
    // Over a pool the guard heard the loss before it sent COMMIT, so it knows nothing was applied.
    if (kind === 'pg.Pool') expect((err as Error).message).toContain('nothing was applied');
    expect(await rowExists(id)).toBe(false);
    await expectHealthy(guard, 1n);
  });

  it('during the COMMIT: GuardUnavailableError that says the outcome is unknown; here it did not commit', async () => {
    const guard = makeGuard(nextResource());
    const id = `commit-${kind}-${++n}`;
    // A deferred constraint trigger runs inside COMMIT: the commit is in progress while it sleeps.
    const slow = `slow_commit_${kind === 'kysely' ? 'k' : 'p'}`;
    await admin.query(`CREATE TABLE "${schema.name}".${slow} (id int)`);
    await admin.query(`CREATE FUNCTION "${schema.name}".${slow}_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$`);
    await admin.query(`CREATE CONSTRAINT TRIGGER ${slow}_t AFTER INSERT ON "${schema.name}".${slow} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "${schema.name}".${slow}_fn()`);
    let pid = 0;
    const write = caught(
      guard.guardedWrite(1n, async (trx) => {
        pid = await backendPid(trx);
        await insert(trx, id, 1n);
        await run(trx, `INSERT INTO ${slow} VALUES (1)`);
      }),
    );
    await waitFor(async () => (await admin.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND query = 'COMMIT' AND state = 'active'`, [pid])).rowCount === 1, 10_000);
    await terminate(pid);
    const err = await write;
    expectUnavailable(err);
    expect((err as Error).message).toContain('outcome is unknown');
    expect(await rowExists(id)).toBe(false);
    await expectHealthy(guard, 1n);
  });
});

it('a Kysely guard without the pool behind it is refused: it could not hear a killed connection', async () => {
  let err: unknown;
  try {
    createPostgresGuard({ db: kyselyOver(schema.pool), resource: 'r' } as never);
  } catch (e) {
    err = e;
  }
  expect(isFencedError(err, 'INVALID_CONFIG')).toBe(true);
  expect(String(err)).toContain('pool');
});

describe('a pool that cannot connect at all (nothing listens on its port)', () => {
  let pool: pg.Pool;
  beforeAll(() => {
    pool = new pg.Pool({ host: '127.0.0.1', port: 1, user: 'postgres', database: 'test', connectionTimeoutMillis: 2000 });
  });
  afterAll(async () => {
    await pool.end();
  });

  it('a guarded write fails typed, in the open phase, nothing applied, the driver error its cause', async () => {
    const guard = createPostgresGuard({ db: pool, resource: 'unreachable', schema: schema.name });
    const err = await caught(guard.guardedWrite(1n, async () => 'written'));
    expect(isFencedError(err, 'GUARD_UNAVAILABLE')).toBe(true);
    expect(String((err as Error).message)).toMatch(/^PostgreSQL guard failed during open; nothing was applied: .*ECONNREFUSED/);
    expect((err as Error).cause).toBeInstanceOf(Error);
  });

  it('answers which of no fires were applied without asking the database', async () => {
    expect(await createPostgresGuard({ db: pool, resource: 'unreachable', schema: schema.name }).appliedFireIds([])).toEqual(new Set());
  });

  it("a read of the fence fails typed, the driver's connect error its cause", async () => {
    const guard = createPostgresGuard({ db: pool, resource: 'unreachable', schema: schema.name });
    const err = await caught(guard.highest());
    expect(isFencedError(err, 'GUARD_UNAVAILABLE')).toBe(true);
    expect(String((err as Error).message)).toMatch(/^PostgreSQL guard failed during query; nothing was applied: .*ECONNREFUSED/);
    expect((err as Error).cause).toBeInstanceOf(Error);
  });
});

it('a db that is neither a Kysely instance nor a pg.Pool (a query without connect, a connect without query) is refused, naming db', () => {
  for (const db of [{ query: async () => ({ rows: [] }) }, { connect: async () => ({}) }]) {
    let err: unknown;
    try {
      createPostgresGuard({ db, resource: 'r' } as never);
    } catch (e) {
      err = e;
    }
    expect(isFencedError(err, 'INVALID_CONFIG') && err.issues.some((i) => i.path === 'db')).toBe(true);
  }
});

it('guardedWriteIn refuses a tx that is no transaction of the driver (no query), before any statement', async () => {
  const guard = createPostgresGuard({ db: schema.pool, resource: 'not-a-tx', schema: schema.name });
  const err = await caught(guard.guardedWriteIn({ begin: () => undefined } as never, 1n, async () => 'written'));
  expect(err).toBeInstanceOf(TypeError);
  expect(String((err as Error).message)).toMatch(/^guardedWriteIn: tx must be a transaction of the PostgreSQL driver/);
});

describe("a client whose own error event comes after its failed statement's reply", () => {
  // pg emits a client's `error` when its socket ends, which can come after the statement that met
  // the killed backend has failed and the write has been caught. This client holds each `error` back
  // 300 ms (and drops it once nothing listens: an ended client emits none), so the write's failure is
  // all the guard knows when it hands the client back.
  class LateErrors extends pg.Client {
    override emit(event: string | symbol, ...args: unknown[]): boolean {
      if (event !== 'error') return super.emit(event, ...args);
      setTimeout(() => void (this.listenerCount('error') > 0 && super.emit(event, ...args)), 300);
      return true;
    }
  }

  it('is handed back broken, not handed out again: the next write on a pool of one connects anew', async () => {
    const applicationName = `late-errors-${process.pid}`;
    const pool = new pg.Pool({ connectionString: schema.pool.options.connectionString, max: 1, application_name: applicationName, Client: LateErrors });
    try {
      const guard = createPostgresGuard({ db: pool, resource: 'late-errors', schema: schema.name });
      await guard.migrate();
      const err = await caught(
        guard.guardedWrite(1n, async (trx) => {
          const pid = Number((await trx.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
          const sleeping = trx.query('SELECT pg_sleep(30)');
          sleeping.catch(() => undefined); // it fails while the backend is being ended, before the await below
          await waitFor(async () => (await admin.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active'`, [pid])).rowCount === 1, 10_000);
          await terminate(pid);
          await sleeping;
        }),
      );
      expect(isFencedError(err, 'GUARD_UNAVAILABLE'), `expected GuardUnavailableError, got ${String(err)}`).toBe(true);
      expect(await guard.guardedWrite(1n, async (trx) => (await trx.query('SELECT 1 AS one')).rows[0].one)).toBe(1);
    } finally {
      await pool.end();
    }
  });
});
