import { MYSQL_NOW_US_SQL, MYSQL_LOCK_TABLES_IDLE_MS, mysqlSessionsBlocking, withMysqlConnection } from '@fenced/shared/internal';
import { failpoints } from '@fenced/shared/failpoints';
import type { MysqlLeaseObjectNames } from './mysql-lease-names.js';
import type { LeaseTakeover } from '../lease-takeover.js';
import { errnoOf, runAgain, type MysqlLeasePool, type MysqlRow } from './mysql-pool.js';


/** ER_LOCK_WAIT_TIMEOUT: the grant waited on the term row as long as it may (only its statement rolled back). */
const LOCK_WAIT_TIMEOUT = 1205;

/** What one grant came to: the acquire procedure's row (null: it gave up waiting), and the sessions it ended. */
export interface GrantAttempt {
  readonly row: MysqlRow | null;
  readonly ended: number;
}

/**
 * One call of the acquire procedure on a connection of its own, so that its session is known: while
 * it waits on the lease's term row (only when the lease is free or expired), every `graceMs` after the
 * first the sessions it waits for are ended. Those are what the expired term held open: its
 * lease-checked writes and fire records (a deposed leader frozen in its transaction), never a live
 * term's, since the grant only waits when the lease has no live holder. InnoDB counts
 * `innodb_lock_wait_timeout` in whole seconds: the procedure sets the session's to the takeover
 * budget, rounded up, and puts it back; past it the grant answers not granted (the caller tries
 * again at once).
 */
export async function grantWithTakeover(pool: MysqlLeasePool, names: MysqlLeaseObjectNames, args: readonly unknown[], takeover: LeaseTakeover): Promise<GrantAttempt> {
  return withMysqlConnection(pool, async (connection, raw) => {
    // mysql2 knows its session's id; asked of the server only where a driver does not say.
    const known = (raw as { connection?: { threadId?: unknown } }).connection?.threadId;
    const thread = typeof known === 'number' ? known : Number((await connection.run('SELECT CONNECTION_ID() AS id'))[0]?.['id']);
    const waitSec = Math.max(1, Math.ceil(takeover.timeoutMs / 1000));
    let settled = false;
    // Sent again after a deadlock (concurrent first grants of a lease meet on its new rows).
    const grant = async (): Promise<MysqlRow[]> => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await connection.run(`CALL ${names.acquireProc}(?, ?, ?, ?)`, [...args, waitSec]);
        } catch (err) {
          if (!runAgain(err, attempt, names.installation)) throw err;
        }
      }
    };
    const call = grant().finally(() => (settled = true));
    // The watch ends the moment the call settles, not at its next look.
    const callSettled = call.then(
      () => undefined,
      () => undefined,
    );
    const lease = args[0];
    const liveHolder = async () => {
      const [rows] = await pool.query(`SELECT 1 FROM ${names.leases} WHERE name = ? AND holder IS NOT NULL AND expires_us > ${MYSQL_NOW_US_SQL}`, [lease]);
      return (rows as unknown[]).length > 0;
    };
    const ending = endWhileWaiting(pool, thread, takeover.graceMs, () => settled, callSettled, liveHolder);
    try {
      const [row] = await call;
      return { row: row ?? null, ended: await ending };
    } catch (err) {
      const ended = await ending;
      if (errnoOf(err) === LOCK_WAIT_TIMEOUT) return { row: null, ended };
      throw err;
    }
  });
}

/**
 * Ends the sessions `thread` waits for, each `graceMs` (at least InnoDB's refresh), until `done()`;
 * never while the lease has a live holder (another acquirer won meanwhile, and what blocks this one
 * may be the new term's own writes: the grant then waits, and answers not granted).
 */
async function endWhileWaiting(pool: MysqlLeasePool, thread: number, graceMs: number, done: () => boolean, settled: Promise<void>, liveHolder: () => Promise<boolean>): Promise<number> {
  const every = Math.max(graceMs, MYSQL_LOCK_TABLES_IDLE_MS);
  let ended = 0;
  const query = async (sql: string, values?: readonly unknown[]) => {
    const [rows] = await pool.query(sql, values);
    return rows as MysqlRow[];
  };
  for (;;) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([settled, new Promise((resolve) => (timer = setTimeout(resolve, every)))]);
    clearTimeout(timer);
    if (done()) return ended;
    let blockers: number[];
    try {
      blockers = await mysqlSessionsBlocking(query, thread);
      if (blockers.length > 0 && (await liveHolder())) continue;
    } catch {
      continue; // the lock tables could not be read this time: look again
    }
    // The grant may settle, and a blocker go, before its KILL is sent.
    if (blockers.length > 0 && failpoints.armed) await failpoints.hit('takeover.blockers-found-before-end');
    for (const blocker of blockers) {
      if (done()) return ended;
      // Ended, or gone meanwhile (ER_NO_SUCH_THREAD), or not this user's to end: then the grant waits on.
      await pool.query(`KILL CONNECTION ${blocker}`).then(
        () => void ended++,
        () => undefined,
      );
    }
  }
}
