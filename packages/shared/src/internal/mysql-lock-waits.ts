// Who blocks whom on MySQL/MariaDB: what an election reads to end a frozen writer that holds a row it
// waits for (the guard's advance on a fence row, the MySQL lease store's grant on a term row).

type Query = (sql: string, values?: readonly unknown[]) => Promise<Array<Record<string, unknown>>>;

/**
 * InnoDB's lock tables (information_schema.INNODB_TRX, INNODB_LOCK_WAITS) are served from a cache
 * that the server refreshes only when nobody read it for 100 ms: a reader that polls faster than that
 * keeps reading the picture from before the wait began. Read them at most this often.
 */
export const MYSQL_LOCK_TABLES_IDLE_MS = 150;

/** The thread ids of the sessions whose locks `waiter` (a thread id) waits for: MariaDB's tables, else MySQL 8's. */
export async function mysqlSessionsBlocking(query: Query, waiter: number): Promise<number[]> {
  let rows;
  try {
    rows = await query(
      `SELECT b.trx_mysql_thread_id AS blocker FROM information_schema.INNODB_LOCK_WAITS w
         JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id
         JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id
        WHERE r.trx_mysql_thread_id = ?`,
      [waiter],
    );
  } catch {
    // MySQL 8 moved lock waits to performance_schema.
    rows = await query(
      `SELECT b.trx_mysql_thread_id AS blocker FROM performance_schema.data_lock_waits w
         JOIN information_schema.INNODB_TRX r ON r.trx_id = w.REQUESTING_ENGINE_TRANSACTION_ID
         JOIN information_schema.INNODB_TRX b ON b.trx_id = w.BLOCKING_ENGINE_TRANSACTION_ID
        WHERE r.trx_mysql_thread_id = ?`,
      [waiter],
    );
  }
  return [...new Set(rows.map((row) => Number(row['blocker'])).filter((id) => Number.isInteger(id) && id > 0))];
}
