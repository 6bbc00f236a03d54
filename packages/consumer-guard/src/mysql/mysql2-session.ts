import type { MysqlConnection, MysqlSession, Row } from './session.js';

/**
 * The parts of a mysql2 promise pool the store uses (typed structurally: mysql2 is an optional peer,
 * and a declaration file that imports it would fail the type check of a project without it).
 */
export interface Mysql2PoolLike {
  getConnection(): Promise<Mysql2PoolConnectionLike>;
  query(sql: string, values?: unknown): Promise<[unknown, unknown]>;
}

/** A connection of a mysql2 promise pool. */
export interface Mysql2PoolConnectionLike {
  query(sql: string, values?: unknown): Promise<[unknown, unknown]>;
  release(): void;
  destroy(): void;
  /** The callback connection underneath: the EventEmitter that reports the socket's errors. */
  readonly connection: { on(event: 'error', listener: (err: Error) => void): unknown; removeListener(event: 'error', listener: (err: Error) => void): unknown };
}

/** What `fn` receives from a mysql2 promise pool: the pooled connection the guarded transaction is on. */
export type Mysql2ConnectionOf<Pool> = Pool extends { getConnection(): Promise<infer C> } ? C : never;

/** True for a mysql2 promise pool (checked structurally). */
export function isMysql2PoolLike(db: object): db is Mysql2PoolLike {
  const p = db as { getConnection?: unknown; query?: unknown; execute?: unknown };
  return typeof p.getConnection === 'function' && typeof p.query === 'function' && typeof p.execute === 'function';
}

const rowsOf = (result: unknown): Row[] => (Array.isArray(result) ? (result as Row[]) : []);

/**
 * The store over a mysql2 promise pool. mysql2's pool connection listens for `error` once, to take
 * itself out of the pool; a second error, or one on a connection the pool already dropped, would be
 * unheard. So the store listens on every connection it checks out until it gives it back, and
 * destroys one that failed rather than releasing it.
 */
export function mysql2Session<Pool extends Mysql2PoolLike>(pool: Pool, onConnectionError: (err: Error) => void): MysqlSession<Mysql2ConnectionOf<Pool>> {
  return {
    async withConnection(body) {
      const conn = await pool.getConnection();
      let lost: Error | undefined;
      const onError = (err: Error) => {
        lost ??= err;
        onConnectionError(err);
      };
      conn.connection.on('error', onError);
      const send = async (sql: string, values?: readonly unknown[]) => {
        try {
          return (await conn.query(sql, values))[0];
        } catch (err) {
          if ((err as { fatal?: unknown }).fatal === true) lost ??= err as Error;
          throw err;
        }
      };
      const connection: MysqlConnection = {
        run: async (sql, values) => rowsOf(await send(sql, values)),
        affected: async (sql, values) => Number(((await send(sql, values)) as { affectedRows?: unknown }).affectedRows ?? 0),
        lost: () => lost,
      };
      try {
        return await body(connection, conn as Mysql2ConnectionOf<Pool>);
      } finally {
        if (lost === undefined) {
          conn.connection.removeListener('error', onError);
          conn.release();
        } else {
          // Still listening: a destroyed socket can report once more on its way out.
          conn.destroy();
        }
      }
    },
    async query(sql, values) {
      return rowsOf((await pool.query(sql, values))[0]);
    },
    async update(sql, values) {
      const [header] = await pool.query(sql, values);
      return Number((header as { affectedRows?: unknown }).affectedRows ?? 0);
    },
  };
}
