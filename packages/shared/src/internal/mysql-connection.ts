// One connection checked out of a mysql2 promise pool, as every fenced package that talks to
// MySQL/MariaDB holds one (the guard's write, the lease store's migrator, the CLI's snapshot read).
// Typed structurally: mysql2 is an optional peer of every package.

/** A connection of a mysql2 promise pool. */
export interface MysqlPooledConnection {
  query(sql: string, values?: unknown): Promise<[unknown, unknown]>;
  release(): void;
  destroy(): void;
  /** The callback connection underneath: the EventEmitter that reports the socket's errors. */
  readonly connection: { on(event: 'error', listener: (err: Error) => void): unknown; removeListener(event: 'error', listener: (err: Error) => void): unknown };
}

/** What the body of a checkout sends on its connection. */
export interface MysqlCheckedOut {
  /** A statement's rows (a CALL's first result set). */
  run(sql: string, values?: readonly unknown[]): Promise<Array<Record<string, unknown>>>;
  /** A data-changing statement: the rows it changed. */
  affected(sql: string, values?: readonly unknown[]): Promise<number>;
  /** The error the connection reported while checked out, if any (it is then broken). */
  lost(): Error | undefined;
}

/** The rows of a reply: a SELECT's rows, or the first result set of a CALL (a CALL's reply lists its result sets, then a header). */
export function mysqlRowsOf(result: unknown): Array<Record<string, unknown>> {
  if (!Array.isArray(result)) return [];
  return (Array.isArray(result[0]) ? result[0] : result) as Array<Record<string, unknown>>;
}

/**
 * `body` on one connection checked out of `pool`, and back in. mysql2's pool connection listens for
 * `error` once, to take itself out of the pool; a second error, or one on a connection the pool
 * already dropped, would be unheard and kill the process. So the connection is listened to for the
 * whole checkout (`onError` hears it too), and one that failed is destroyed rather than released.
 */
export async function withMysqlConnection<C extends MysqlPooledConnection, T>(
  pool: { getConnection(): Promise<C> },
  body: (connection: MysqlCheckedOut, raw: C) => Promise<T>,
  onError?: (err: Error) => void,
): Promise<T> {
  const conn = await pool.getConnection();
  let lost: Error | undefined;
  const listener = (err: Error) => {
    lost ??= err;
    onError?.(err);
  };
  conn.connection.on('error', listener);
  const send = async (sql: string, values?: readonly unknown[]) => {
    try {
      return (await conn.query(sql, values))[0];
    } catch (err) {
      if ((err as { fatal?: unknown }).fatal === true) lost ??= err as Error;
      throw err;
    }
  };
  const connection: MysqlCheckedOut = {
    run: async (sql, values) => mysqlRowsOf(await send(sql, values)),
    affected: async (sql, values) => Number(((await send(sql, values)) as { affectedRows?: unknown }).affectedRows ?? 0),
    lost: () => lost,
  };
  try {
    return await body(connection, conn);
  } finally {
    if (lost === undefined) {
      conn.connection.removeListener('error', listener);
      conn.release();
    } else {
      // Still listening: a destroyed socket can report once more on its way out.
      conn.destroy();
    }
  }
}

/**
 * The MySQL/MariaDB server's clock now, in microseconds since the epoch, whatever the session's time
 * zone: how every MySQL part of fenced reads the server's time (the lease store, its CLI reader).
 */
export const MYSQL_NOW_US_SQL = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`;
