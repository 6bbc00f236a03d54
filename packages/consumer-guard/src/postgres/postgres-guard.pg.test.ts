import { isFencedError, MAX_TOKEN, type FencedEvent } from '@fenced/shared';
import { createPool, createTestSchema, kyselyOver, resultWithin, waitForLockWait } from '#test-support';
import type { Generated, Kysely } from 'kysely';
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createPostgresGuard } from './index.js';

interface DB {
  ledger: { id: Generated<number>; resource: string; token: string; note: string };
}

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let db: Kysely<DB>;

beforeAll(async () => {
  schema = await createTestSchema('guard');
  db = kyselyOver<DB>(schema.pool);
  await schema.pool.query(`CREATE TABLE ledger (id serial PRIMARY KEY, resource text NOT NULL, token bigint NOT NULL, note text NOT NULL)`);
});
afterAll(async () => {
  await schema.drop();
});

let resourceCounter = 0;
let resource: string;
beforeEach(() => {
  resource = `res-${++resourceCounter}`;
});

const ledgerCount = async () => Number((await schema.pool.query(`SELECT count(*) AS n FROM ledger`)).rows[0].n);

async function expectCode(promise: Promise<unknown>, code: string): Promise<unknown> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(isFencedError(caught), `expected a fenced error ${code}, got ${String(caught)}`).toBe(true);
  expect((caught as { code: string }).code).toBe(code);
  return caught;
}

describe.each(['kysely', 'pg.Pool'] as const)('createPostgresGuard over %s', (kind) => {
  const makeGuard = (res: string, extra: { logger?: (e: FencedEvent) => void } = {}) =>
    kind === 'kysely'
      ? createPostgresGuard({ db, pool: schema.pool, resource: res, schema: schema.name, ...extra })
      : createPostgresGuard({ db: schema.pool, resource: res, schema: schema.name, ...extra });

  const insert = (note: string) => async (trx: unknown, ctx: { token: bigint; resource: string }) => {
    if (kind === 'kysely') {
      const row = await (trx as Kysely<DB>)
        .insertInto('ledger')
        .values({ resource: ctx.resource, token: ctx.token.toString(), note })
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id;
    }
    const r = await (trx as pg.PoolClient).query(`INSERT INTO ledger (resource, token, note) VALUES ($1, $2, $3) RETURNING id`, [
      ctx.resource,
      ctx.token.toString(),
      note,
    ]);
    return r.rows[0].id as number;
  };

  beforeAll(async () => {
    await makeGuard('setup').migrate();
  });

  it("guardedWriteIn joins the caller's own transaction as the driver gives it (a Kysely transaction, a pg client after BEGIN), fn gets it back, and a pool or a Kysely instance is refused before anything is written", async () => {
    await makeGuard(resource).advance(5n);
    if (kind === 'kysely') {
      const guard = createPostgresGuard({ db, pool: schema.pool, resource, schema: schema.name });
      await expect(
        db.transaction().execute(async (trx) => {
          const seen = await guard.guardedWriteIn(trx, 6n, async (tx, ctx) => {
            await insert('in-kysely')(tx, ctx);
            return tx;
          });
          expect(seen).toBe(trx);
          await expectCode(guard.guardedWriteIn(trx, 4n, insert('stale')), 'STALE_TOKEN');
          throw new Error('the caller rolls back');
        }),
      ).rejects.toThrow('the caller rolls back');
      expect(await guard.highest()).toBe(5n);
      await db.transaction().execute((trx) => guard.guardedWriteIn(trx, 6n, insert('in-kysely')));
      await expect(guard.guardedWriteIn(db as never, 7n, insert('no'))).rejects.toThrow(/Kysely instance, not a transaction/);
    } else {
      const guard = createPostgresGuard({ db: schema.pool, resource, schema: schema.name });
      const client = await schema.pool.connect();
      try {
        await client.query('BEGIN');
        await expectCode(guard.guardedWriteIn(client, 4n, insert('stale')), 'STALE_TOKEN');
        const seen = await guard.guardedWriteIn(client, 6n, async (tx, ctx) => {
          await insert('in-client')(tx, ctx);
          return tx;
        });
        expect(seen).toBe(client);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
      await expect(guard.guardedWriteIn(schema.pool as never, 7n, insert('no'))).rejects.toThrow(expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/^guardedWriteIn: tx is a pool/) }));
    }
    expect(await makeGuard(resource).highest()).toBe(6n);
    const { rows } = await schema.pool.query('SELECT note FROM ledger WHERE resource = $1 ORDER BY id', [resource]);
    expect(rows.map((r: { note: string }) => r.note)).toEqual([kind === 'kysely' ? 'in-kysely' : 'in-client']);
  });

  it('migrate is idempotent and safe to run concurrently', async () => {
    const guard = makeGuard(resource);
    await Promise.all([guard.migrate(), guard.migrate(), guard.migrate()]);
    await guard.migrate();
  });

  it('accepts rising and equal tokens, returns what fn returns, and tracks the highest', async () => {
    const guard = makeGuard(resource);
    expect(await guard.highest()).toBeNull();
    const id = await guard.guardedWrite(5n, insert('first'));
    expect(typeof id).toBe('number');
    await guard.guardedWrite('5', insert('same token again'));
    await guard.guardedWrite(9, insert('raised'));
    expect(await guard.highest()).toBe(9n);
  });

  it('refuses a lower token with StaleTokenError and never calls fn', async () => {
    const events: FencedEvent[] = [];
    const guard = makeGuard(resource, { logger: (e) => events.push(e) });
    await guard.guardedWrite(10n, insert('leader 10'));
    const before = await ledgerCount();
    let called = false;
    const err = await expectCode(
      guard.guardedWrite(9n, async () => {
        called = true;
      }),
      'STALE_TOKEN',
    );
    expect(err).toMatchObject({ resource, token: 9n, highest: 10n });
    expect(called).toBe(false);
    expect(await ledgerCount()).toBe(before);
    expect(events).toContainEqual({ type: 'token.rejected', resource, token: 9n, highest: 10n, via: 'postgres' });
  });

  it('rolls everything back when fn throws: no row, fence not raised', async () => {
    const guard = makeGuard(resource);
    await guard.guardedWrite(2n, insert('base'));
    const before = await ledgerCount();
    const boom = new Error('handler failed');
    await expect(
      guard.guardedWrite(7n, async (trx, ctx) => {
        await insert('doomed')(trx, ctx);
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await ledgerCount()).toBe(before);
    expect(await guard.highest()).toBe(2n);
  });

  it('treats a swallowed SQL error as a failed write, not a success', async () => {
    const guard = makeGuard(resource);
    await guard.guardedWrite(1n, insert('base'));
    const attempt = guard.guardedWrite(6n, async (trx) => {
      try {
        if (kind === 'kysely') await (trx as Kysely<DB>).selectFrom('no_such_table' as never).selectAll().execute();
        else await (trx as pg.PoolClient).query('SELECT * FROM no_such_table');
      } catch {
        // swallowed: the transaction is aborted anyway
      }
      return 'looks fine';
    });
    await expectCode(attempt, 'GUARD_UNAVAILABLE');
    expect(await guard.highest()).toBe(1n);
  });

  it('overrides the resource per call', async () => {
    const guard = makeGuard(resource);
    const other = `${resource}-other`;
    await guard.guardedWrite(50n, insert('other'), { resource: other });
    expect(await guard.fence(other).highest()).toBe(50n);
    // The default resource is untouched, so a low token still passes there.
    await guard.guardedWrite(1n, insert('default'));
    expect(await guard.highest()).toBe(1n);
  });

  it('round-trips tokens near 2^63-1 exactly', async () => {
    const guard = makeGuard(resource);
    await guard.guardedWrite(MAX_TOKEN - 1n, insert('near max'));
    expect(await guard.highest()).toBe(MAX_TOKEN - 1n);
    await guard.guardedWrite(MAX_TOKEN, insert('max'));
    expect(await guard.highest()).toBe(MAX_TOKEN);
    await expectCode(guard.guardedWrite(MAX_TOKEN - 1n, insert('stale')), 'STALE_TOKEN');
    const rows = await schema.pool.query(`SELECT token::text AS t FROM ledger WHERE resource = $1 ORDER BY id`, [resource]);
    expect(rows.rows.map((r) => r.t)).toEqual([(MAX_TOKEN - 1n).toString(), MAX_TOKEN.toString()]);
  });

  it('advance is strict: it refuses an equal or lower token and raises above', async () => {
    const guard = makeGuard(resource);
    await guard.advance(20n);
    expect(await guard.highest()).toBe(20n);
    await expectCode(guard.advance(20n), 'FENCE_AHEAD');
    await expectCode(guard.advance(19n), 'FENCE_AHEAD');
    await guard.advance(21n);
    await expectCode(guard.guardedWrite(20n, insert('deposed')), 'STALE_TOKEN');
    await guard.guardedWrite(21n, insert('new leader'));
  });

  /** A guarded write of `token` held inside fn (its check done, its row lock held) until `release()`. */
  async function holdWrite(guard: ReturnType<typeof makeGuard>, token: bigint, note: string) {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const done = guard.guardedWrite(token, async (trx, ctx) => {
      entered();
      await held;
      return insert(note)(trx, ctx);
    });
    await inside;
    return { release, done };
  }

  it('advance waits for an in-flight lower-token write, then fences it out', async () => {
    const guard = makeGuard(resource);
    await guard.guardedWrite(1n, insert('base'));
    const { release, done: slowWrite } = await holdWrite(guard, 1n, 'in flight');
    let advanced = false;
    const advancing = guard.advance(2n).then(() => (advanced = true));
    await waitForLockWait(schema.pool, schema.name); // the advance reached PostgreSQL and waits…
    expect(advanced).toBe(false); // …blocked behind the share lock of the in-flight write
    release();
    await slowWrite; // the in-flight write validated first, so it commits
    await advancing;
    await expectCode(guard.guardedWrite(1n, insert('late')), 'STALE_TOKEN');
  });

  it("a write of the fence's own token from a process that never saw the fence shares the row: it does not wait for the term's write in flight", async () => {
    // The process guesses a raise (it knows no fence), and the check's first statement is the raise;
    // it must not match an equal fence, or the write takes the row exclusively and a term's writes
    // queue one behind another after every restart.
    const writer = makeGuard(resource);
    await writer.guardedWrite(7n, insert('first'));
    const { release, done: inFlight } = await holdWrite(writer, 7n, 'in flight');
    const restarted = makeGuard(resource);
    try {
      expect(await resultWithin(restarted.guardedWrite(7n, insert('beside')).then(() => 'committed'), 20_000, 'still waiting after 20 s')).toBe('committed');
    } finally {
      release();
    }
    await inFlight;
    expect(await restarted.highest()).toBe(7n);
  });

  describe('bad input changes nothing', () => {
    it.each([
      ['zero', 0],
      ['negative', -3],
      ['fraction', 1.5],
      ['"12abc"', '12abc'],
      ['"1e3"', '1e3'],
      ['past 2^53 as a number', 2 ** 53 + 2],
      ['past 2^63-1', '9223372036854775808'],
      ['an object', { t: 1 }],
    ])('token %s: InvalidTokenError before any database call', async (_label, token) => {
      const guard = makeGuard(resource);
      let called = false;
      await expectCode(
        guard.guardedWrite(token as never, async () => {
          called = true;
        }),
        'INVALID_TOKEN',
      );
      expect(called).toBe(false);
      expect(await guard.highest()).toBeNull();
    });

    it.each([
      ['empty', ''],
      ['NUL', 'fire\u0000x'],
      ['a lone surrogate', 'fire\uD800'],
      ['over 512 characters', 'f'.repeat(513)],
      ['a number', 42],
    ])('fireId %s: a typed envelope error naming fireId, before any database call', async (_label, fireId) => {
      const guard = makeGuard(resource);
      let called = false;
      await expectCode(
        guard.guardedWrite(1n, async () => void (called = true), { fireId: fireId as string }),
        'INVALID_ENVELOPE',
      );
      expect(called).toBe(false);
      expect(await guard.highest()).toBeNull();
    });

    it.each([
      ['quotes', `it's "quoted"`],
      ['semicolons and SQL', `x'); DROP TABLE ledger; --`],
      ['backslashes', `a\\'b\\\\c`],
      ['a $2 placeholder', `$2$1 $$ $fn$`],
      ['unicode', 'facturation-€-請求-🧾'],
      ['1 KB', 'r'.repeat(1024)],
    ])('resource names are data: %s', async (_label, name) => {
      const guard = makeGuard(name);
      await guard.guardedWrite(3n, insert('ok'));
      expect(await guard.highest()).toBe(3n);
      await expectCode(guard.guardedWrite(2n, insert('stale')), 'STALE_TOKEN');
      const stored = await schema.pool.query(`SELECT resource FROM fenced_fences WHERE resource = $1`, [name]);
      expect(stored.rows).toEqual([{ resource: name }]);
      expect(await ledgerCount()).toBeGreaterThan(0); // the ledger table survived
    });

    it.each([
      ['empty', ''],
      ['NUL', 'a\u0000b'],
      ['over 1 KB', 'r'.repeat(1025)],
    ])('resource %s is refused at creation and per call', async (_label, name) => {
      let caught: unknown;
      try {
        makeGuard(name);
      } catch (err) {
        caught = err;
      }
      expect(isFencedError(caught, 'INVALID_CONFIG')).toBe(true);
      await expectCode(makeGuard(resource).guardedWrite(1n, async () => 1, { resource: name }), 'INVALID_RESOURCE');
    });

    it.each(['fences; drop', 'Upper', '1abc', 'a"b', 'x'.repeat(49)])('table name %j is refused as an identifier', (table) => {
      let caught: unknown;
      try {
        createPostgresGuard({ db, pool: schema.pool, resource: 'r', table });
      } catch (err) {
        caught = err;
      }
      expect(isFencedError(caught, 'INVALID_CONFIG')).toBe(true);
      expect((caught as { issues: { path: string }[] }).issues[0]?.path).toBe('table');
    });

    it('refuses a db that is neither Kysely nor a pool', () => {
      expect(() => createPostgresGuard({ db: {} as never, resource: 'r' })).toThrow(/db/);
    });
  });
});

describe('PostgreSQL unreachable', () => {
  it('gives GuardUnavailableError with the driver error as cause, and nothing is applied', async () => {
    // Port 1 on loopback: nothing listens there.
    const dead = createPool({ connectionString: 'postgres://postgres@127.0.0.1:1/test', max: 1 });
    const guard = createPostgresGuard({ db: dead, resource: 'r', schema: schema.name });
    let called = false;
    const err = await expectCode(
      guard.guardedWrite(1n, async () => {
        called = true;
      }),
      'GUARD_UNAVAILABLE',
    );
    expect((err as Error).cause).toBeInstanceOf(Error);
    expect(called).toBe(false);
    await expectCode(guard.highest(), 'GUARD_UNAVAILABLE');
    await dead.end();
  });

  it('says when the guard was not migrated', async () => {
    const guard = createPostgresGuard({ db: schema.pool, resource: 'r', schema: schema.name, table: 'never_migrated' });
    const err = await expectCode(guard.guardedWrite(1n, async () => 1), 'GUARD_UNAVAILABLE');
    expect((err as Error).message).toMatch(/migrate/);
  });

  it('refuses to migrate an installation a newer version migrated further, and changes nothing', async () => {
    const table = 'from_the_future';
    const guard = createPostgresGuard({ db: schema.pool, resource: 'r', schema: schema.name, table });
    await guard.migrate();
    await schema.pool.query(`INSERT INTO "${schema.name}"."${table}_migrations" (id) VALUES (999)`);
    const before = (await schema.pool.query(`SELECT id FROM "${schema.name}"."${table}_migrations" ORDER BY id`)).rows;
    const err = await expectCode(guard.migrate(), 'SCHEMA_TOO_NEW');
    expect(err).toMatchObject({ databaseRevision: 999, supportedRevision: 7 });
    expect((await schema.pool.query(`SELECT id FROM "${schema.name}"."${table}_migrations" ORDER BY id`)).rows).toEqual(before);
  });
});

describe('the fence table itself', () => {
  it('holds positive tokens only, even against a hand-written statement (an operator editing the table)', async () => {
    const guard = createPostgresGuard({ db: schema.pool, resource: 'hand-edited', schema: schema.name });
    await guard.migrate();
    await guard.guardedWrite(5n, async () => undefined);
    const fences = `"${schema.name}".fenced_fences`;
    for (const statement of [`INSERT INTO ${fences} (resource, token) VALUES ('hand-inserted', 0)`, `UPDATE ${fences} SET token = 0 WHERE resource = 'hand-edited'`]) {
      await expect(schema.pool.query(statement), statement).rejects.toMatchObject({ code: '23514' });
    }
    expect(await guard.highest()).toBe(5n);
  });
});
