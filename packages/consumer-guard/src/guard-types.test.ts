import type { Token } from '@fenced/shared';
import { Kysely, PostgresDialect, type Transaction } from 'kysely';
import pg from 'pg';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { createGuard, type Guard, type HandlerContext } from './index.js';
import { createPostgresGuard, type PostgresGuard } from './postgres/index.js';

// The factories' overloads as a consumer sees them: the transaction a callback receives is the
// driver's own type, picked from what `db` is. Checked by the type check (`pnpm test` runs tsc over
// the tests); the runtime part only makes sure the objects are built without touching a database.
interface DB {
  invoices: { id: number; amount: number };
}

describe('the guard factories are typed by their db', () => {
  const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });

  it('Kysely<DB> gives Transaction<DB>', async () => {
    const guard = createGuard({ db, pool, resource: 'billing' });
    expectTypeOf(guard).toEqualTypeOf<Guard<Transaction<DB>>>();
    expectTypeOf(createPostgresGuard({ db, pool, resource: 'billing' })).toEqualTypeOf<PostgresGuard<Transaction<DB>>>();
    expectTypeOf(guard.guardedWrite<number>).parameter(1).parameter(0).toEqualTypeOf<Transaction<DB>>();
    guard.wrapHandler(async (_payload, ctx) => {
      expectTypeOf(ctx).toEqualTypeOf<HandlerContext<Transaction<DB>>>();
      expectTypeOf(ctx.token).toEqualTypeOf<Token>();
      // A typed query on the transaction compiles: the table and its columns are DB's.
      return ctx.guardedWrite((trx) => trx.insertInto('invoices').values({ id: 1, amount: 2 }).execute());
    });
    expect(guard.resource).toBe('billing');
  });

  it('a pg.Pool gives its PoolClient', () => {
    const guard = createGuard({ db: pool, resource: 'billing' });
    expectTypeOf(guard).toEqualTypeOf<Guard<pg.PoolClient>>();
    expectTypeOf(createPostgresGuard({ db: pool, resource: 'billing' })).toEqualTypeOf<PostgresGuard<pg.PoolClient>>();
    expect(guard.resource).toBe('billing');
  });

  it('anything else does not compile, and is a ConfigError at run time', () => {
    // @ts-expect-error: not a Kysely instance nor a pool
    expect(() => createGuard({ db: { query: 1 }, resource: 'billing' })).toThrow(/db/);
    // @ts-expect-error: the resource is required
    expect(() => createPostgresGuard({ db: pool })).toThrow(/resource/);
  });
});
