// How the MySQL store talks to its database, whatever the caller handed it (a mysql2 promise pool or
// a Kysely instance over MysqlDialect). Everything above this file sees rows, never a driver.
import { failpoints } from '@fenced/shared/failpoints';
import { PhaseError, type TransactionPhase } from '../sql/phase-error.js';

/** A row as the store reads it: column name to value. */
export type Row = Record<string, unknown>;

/** One checked-out connection: statements with `?` placeholders, and what the driver heard on it. */
export interface MysqlConnection {
  run(sql: string, values?: readonly unknown[]): Promise<Row[]>;
  /** A data-changing statement: the rows it changed. */
  affected(sql: string, values?: readonly unknown[]): Promise<number>;
  /** The error the connection reported while checked out, if any (it is then broken). */
  lost(): Error | undefined;
}

export interface MysqlSession<Trx> {
  /**
   * Checks a connection out for `body` (with the caller-facing `trx` over the same connection) and
   * back in; a connection that failed is destroyed, never pooled again. Its errors are heard for the
   * whole checkout (an unheard one would kill the process).
   */
  withConnection<T>(body: (connection: MysqlConnection, trx: Trx) => Promise<T>): Promise<T>;
  /** One statement on any connection, in its own implicit transaction. */
  query(sql: string, values?: readonly unknown[]): Promise<Row[]>;
  /** One data-changing statement on any connection, in its own implicit transaction: the rows it changed. */
  update(sql: string, values?: readonly unknown[]): Promise<number>;
}

export type IsolationLevel = 'read committed' | 'repeatable read' | 'serializable';

/**
 * The guarded transaction on one connection: the isolation level when one was asked for, START
 * TRANSACTION, the check, `body`, COMMIT. Any failure rolls back and throws a {@link PhaseError}
 * saying where it happened, whether the connection broke, and whether a COMMIT may have taken effect.
 * (mysql2 does not send several statements in one round trip unless the pool allows it for every
 * query, which the caller's pool should not, so each statement is a round trip of its own.)
 */
export async function runGuardedTransaction<Trx, T>(
  connection: MysqlConnection,
  trx: Trx,
  isolation: IsolationLevel | undefined,
  check: (connection: MysqlConnection) => Promise<void>,
  body: (trx: Trx) => Promise<T>,
  closing?: (connection: MysqlConnection, result: T) => Promise<void>,
): Promise<T> {
  let phase: TransactionPhase = 'open';
  let commitSent = false;
  let open = false;
  try {
    if (isolation !== undefined) await connection.run(`SET TRANSACTION ISOLATION LEVEL ${isolation.toUpperCase()}`);
    await connection.run('START TRANSACTION');
    open = true;
    await check(connection);
    phase = 'body';
    const result = await body(trx);
    // What records the body's result (a fire's outcome): the last statement inside the transaction.
    if (closing !== undefined) await closing(connection, result);
    phase = 'commit';
    if (failpoints.armed) await failpoints.hit('guard.checked-before-commit');
    const lost = connection.lost();
    if (lost !== undefined) throw lost;
    commitSent = true;
    await connection.run('COMMIT');
    return result;
  } catch (err) {
    let broken = connection.lost() !== undefined;
    if (!broken && open) {
      await connection.run('ROLLBACK').catch(() => {
        broken = true;
      });
    }
    throw new PhaseError(phase, err, { connectionBroken: broken, outcomeUnknown: commitSent && broken });
  }
}
