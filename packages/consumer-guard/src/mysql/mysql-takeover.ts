import { MYSQL_LOCK_TABLES_IDLE_MS, mysqlSessionsBlocking, storedToken } from '@fenced/shared/internal';
import { failpoints } from '@fenced/shared/failpoints';
import type { Token } from '@fenced/shared';
import type { BlockingWrite, TakeoverStore } from '../takeover/advance-with-takeover.js';
import { errnoOf } from './mysql-errors.js';
import type { MysqlObjectNames } from './names.js';
import type { MysqlSession } from './session.js';

/** ER_KILL_DENIED_ERROR: this user may not end that session. */
const KILL_DENIED = 1095;
/** ER_NO_SUCH_THREAD: the session ended on its own meanwhile. */
const NO_SUCH_THREAD = 1094;

/**
 * The election-time advance on MySQL/MariaDB, as a {@link TakeoverStore}: the waiter is the advance's
 * session (its thread id); the blockers are the sessions holding the fence row it waits for.
 *
 * Which token a blocker carries is read from the row it holds, with a dirty read: the fence row's
 * uncommitted value is the blocker's token when its write raised the fence, else the committed fence
 * (which its token cannot be above). So a value below the advancing token proves the blocker's token
 * is lower, and a blocker of the same or a higher token is never ended. Only guarded writes, the
 * advance and the audited lowering ever lock a fence row.
 */
/** The advance that waits: its session and the resource whose fence row it wants. */
interface AdvanceSession {
  readonly threadId: number;
  readonly resource: string;
}

export function mysqlTakeoverStore(session: MysqlSession<unknown>, names: MysqlObjectNames): TakeoverStore<AdvanceSession> {
  // InnoDB's lock tables are read at most every MYSQL_LOCK_TABLES_IDLE_MS, whatever the grace period
  // (see there; readers elsewhere on the server can still delay the refresh: then the advance waits
  // until its own timeout, and the election fails closed).
  let lastLockRead = -Infinity;
  return {
    startAdvance(resource, token, timeoutMs) {
      let announce!: (waiter: AdvanceSession) => void;
      let fail!: (err: unknown) => void;
      const waiter = new Promise<AdvanceSession>((resolve, reject) => {
        announce = resolve;
        fail = reject;
      });
      const done = session.withConnection(async (connection) => {
        const [row] = await connection.run('SELECT CONNECTION_ID() AS id, @@SESSION.innodb_lock_wait_timeout AS lockWait');
        announce({ threadId: Number(row?.['id']), resource });
        // innodb_lock_wait_timeout counts whole seconds. The pooled session's own bound (the
        // application's, not necessarily the server's default) is put back after.
        const ownLockWait = row?.['lockWait'];
        if (timeoutMs > 0) await connection.run('SET SESSION innodb_lock_wait_timeout = ?', [Math.max(1, Math.ceil(timeoutMs / 1000))]);
        try {
          await connection.run('START TRANSACTION');
          await connection.run(`CALL ${names.advanceProc}(?, ?)`, [resource, token.toString()]);
          await connection.run('COMMIT');
        } catch (err) {
          await connection.run('ROLLBACK').catch(() => undefined);
          throw err;
        } finally {
          if (timeoutMs > 0) await connection.run('SET SESSION innodb_lock_wait_timeout = ?', [ownLockWait]).catch(() => undefined);
        }
      });
      done.catch(fail);
      return { waiter, done };
    },

    async endBlockers(waiter, token) {
      if (performance.now() - lastLockRead < MYSQL_LOCK_TABLES_IDLE_MS) return [];
      let blockers: number[];
      try {
        blockers = await mysqlSessionsBlocking((sql, values) => session.query(sql, values), waiter.threadId);
      } finally {
        lastLockRead = performance.now();
      }
      if (blockers.length === 0) return [];
      const held = await dirtyFence(session, names, waiter.resource);
      // The blocker's token is at most `held`: end it only when that is below ours.
      if (held === null || held >= token) return [];
      // A blocker may commit, roll back or be ended by someone else before its KILL arrives.
      if (failpoints.armed) await failpoints.hit('takeover.blockers-found-before-end');
      const found: BlockingWrite[] = [];
      for (const blocker of blockers) {
        try {
          await session.query(`KILL CONNECTION ${blocker}`);
          found.push({ session: String(blocker), token: held, ended: true });
        } catch (err) {
          if (errnoOf(err) === NO_SUCH_THREAD) continue;
          if (errnoOf(err) === KILL_DENIED) found.push({ session: String(blocker), token: held, ended: false });
          else throw err;
        }
      }
      return found;
    },
  };
}

/** The fence row's value as its holder left it, committed or not (READ UNCOMMITTED, one statement). */
async function dirtyFence(session: MysqlSession<unknown>, names: MysqlObjectNames, resource: string): Promise<Token | null> {
  return session.withConnection(async (connection) => {
    // Applies to the next transaction only: the SELECT's own, in autocommit.
    await connection.run('SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED');
    const [row] = await connection.run(`SELECT CAST(token AS CHAR) AS token FROM ${names.fences} WHERE resource = ?`, [resource]);
    return row === undefined ? null : storedToken(String(row['token']));
  });
}
