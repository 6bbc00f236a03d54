import { mysqlRowsOf, withMysqlConnection, type MysqlPooledConnection } from '@fenced/shared/internal';
import type { MysqlSession } from './session.js';
import type { TransactionExecutor } from '../write-context.js';

/**
 * The parts of a mysql2 promise pool the store uses (typed structurally: mysql2 is an optional peer,
 * and a declaration file that imports it would fail the type check of a project without it).
 */
export interface Mysql2PoolLike {
  getConnection(): Promise<Mysql2PoolConnectionLike>;
  query(sql: string, values?: unknown): Promise<[unknown, unknown]>;
}

/** A connection of a mysql2 promise pool. */
export type Mysql2PoolConnectionLike = MysqlPooledConnection;

/** What `fn` receives from a mysql2 promise pool: the pooled connection the guarded transaction is on. */
export type Mysql2ConnectionOf<Pool> = Pool extends { getConnection(): Promise<infer C> } ? C : never;

/** True for a mysql2 promise pool (checked structurally). */
export function isMysql2PoolLike(db: object): db is Mysql2PoolLike {
  const p = db as { getConnection?: unknown; query?: unknown; execute?: unknown };
  return typeof p.getConnection === 'function' && typeof p.query === 'function' && typeof p.execute === 'function';
}

/**
 * The store over a mysql2 promise pool: each guarded write on a connection checked out and listened
 * to for the whole checkout (the shared `withMysqlConnection`), destroyed rather than released when it
 * failed.
 */
export function mysql2Session<Pool extends Mysql2PoolLike>(pool: Pool, onConnectionError: (err: Error) => void): MysqlSession<Mysql2ConnectionOf<Pool>> {
  return {
    withConnection: (body) => withMysqlConnection(pool, (connection, raw) => body(connection, raw as Mysql2ConnectionOf<Pool>), onConnectionError),
    async query(sql, values) {
      return mysqlRowsOf((await pool.query(sql, values))[0]);
    },
    async update(sql, values) {
      const [header] = await pool.query(sql, values);
      return Number((header as { affectedRows?: unknown }).affectedRows ?? 0);
    },
  };
}

/**
 * A mysql2 promise connection a caller opened a transaction on, as an executor: its `query` answers
 * `[rows, fields]` (a statement that returns no rows answers a header in place of rows).
 */
export function mysql2ConnectionExecutor(tx: object): TransactionExecutor | undefined {
  const connection = tx as { query?: (sql: string, values?: unknown) => unknown };
  if (typeof connection.query !== 'function') return undefined;
  return {
    async executeSql(text, values) {
      const answer = await connection.query!(text, values);
      if (!Array.isArray(answer)) throw new TypeError('guardedWriteIn: tx must be a mysql2 promise connection (mysql2/promise), not a callback one');
      return { rows: Array.isArray(answer[0]) ? (answer[0] as unknown[]) : [] };
    },
  };
}
