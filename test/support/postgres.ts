import { randomBytes } from 'node:crypto';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { inject } from 'vitest';
import { waitFor } from './redis.js';

// bigint columns come back as strings (exact); tests convert with BigInt where they need numbers.

/** A fresh schema name, unique to this run and call, so concurrent runs never collide. */
export function uniqueSchemaName(prefix = 't'): string {
  return `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

export function testDatabaseUrl(): string {
  return inject('databaseUrl');
}

/**
 * A pg pool on the test database whose connections use `schema` first on their search path. The
 * session options of the environment (PGOPTIONS, which node-postgres reads only when a pool names no
 * options of its own) are kept: `pnpm mutate` bounds every statement of a mutant's tests with them.
 */
export function createPool(options: { schema?: string; max?: number; connectionString?: string } = {}): pg.Pool {
  const sessionOptions = [process.env['PGOPTIONS'], options.schema === undefined ? undefined : `-c search_path=${options.schema},public`].filter((option) => option !== undefined && option !== '');
  const pool = new pg.Pool({
    connectionString: options.connectionString ?? testDatabaseUrl(),
    max: options.max ?? 10,
    ...(sessionOptions.length === 0 ? {} : { options: sessionOptions.join(' ') }),
  });
  // An idle client that loses its connection emits on the pool; without a listener that kills the process.
  pool.on('error', () => {});
  return pool;
}

/**
 * A schema of its own for one test file: created now, dropped (with everything in it) by `drop()`.
 * In the test database, or in the one `connectionString` names.
 */
export async function createTestSchema(prefix?: string, connectionString?: string): Promise<{ name: string; pool: pg.Pool; drop: () => Promise<void> }> {
  const name = uniqueSchemaName(prefix);
  const on = connectionString === undefined ? {} : { connectionString };
  const admin = createPool({ max: 1, ...on });
  await admin.query(`CREATE SCHEMA "${name}"`);
  const pool = createPool({ schema: name, ...on });
  return {
    name,
    pool,
    drop: async () => {
      await pool.end();
      await admin.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`);
      await admin.end();
    },
  };
}

/**
 * A database of its own, for what a schema cannot keep apart: graphile-worker's workers shut down on
 * a `worker:migrate` notification, which is database-wide, so another file's fresh graphile-worker
 * schema, migrated in the shared test database, ended this file's workers. `drop()` ends its
 * sessions and drops it.
 */
export async function createTestDatabase(prefix = 'db'): Promise<{ name: string; url: string; drop: () => Promise<void> }> {
  const name = uniqueSchemaName(prefix);
  const admin = createPool({ max: 1 });
  await admin.query(`CREATE DATABASE "${name}"`);
  const url = new URL(testDatabaseUrl());
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: async () => {
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.end();
    },
  };
}

export function kyselyOver<DB>(pool: pg.Pool): Kysely<DB> {
  return new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
}

/** Runs `fn` with a client checked out of `pool`, released afterwards. */
export async function withPgClient<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    return await fn(client);
  } finally {
    client.release();
  }
}

/**
 * A pg pool wrapper that counts what reaches PostgreSQL: connections checked out and queries sent.
 * Structural, over a real pool: the code under test talks to the real database through it.
 */
export function countingPool(pool: pg.Pool): { pool: pg.Pool; counts: { connects: number; queries: number } } {
  const counts = { connects: 0, queries: 0 };
  const counted = {
    async connect() {
      counts.connects++;
      const client = await pool.connect();
      return new Proxy(client, {
        get(target, property, receiver) {
          if (property === 'query') {
            return (...args: unknown[]) => {
              counts.queries++;
              return (target.query as (...a: unknown[]) => unknown)(...args);
            };
          }
          const value: unknown = Reflect.get(target, property, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    },
    async query(...args: unknown[]) {
      counts.queries++;
      return (pool.query as (...a: unknown[]) => unknown)(...args);
    },
  };
  return { pool: counted as unknown as pg.Pool, counts };
}

/**
 * Resolves once `sessions` backends of this database (one by default) wait on a lock while running a
 * statement whose text contains `marker` (a test file's schema name, say): the moment a test knows a
 * transaction is blocked, rather than hoping a fixed sleep was long enough on a busy machine. Rejects
 * after `timeoutMs`.
 */
export async function waitForLockWait(pool: pg.Pool, marker: string, timeoutMs = 20_000, sessions = 1): Promise<void> {
  const blocked = async () => {
    const { rows } = await pool.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND strpos(query, $1) > 0`,
      [marker],
    );
    return (rows[0] as { n: number }).n >= sessions;
  };
  await waitFor(blocked, timeoutMs).catch(() => {
    throw new Error(`fewer than ${sessions} statements containing ${JSON.stringify(marker)} waited on a lock within ${timeoutMs} ms`);
  });
}
