// How the guard talks to PostgreSQL, whatever the caller handed it (a Kysely instance or a pg pool).
import { failpoints } from '@fenced/shared/failpoints';
import { PhaseError, type TransactionPhase } from '../sql/phase-error.js';

export type IsolationLevel = 'read committed' | 'repeatable read' | 'serializable';

/** A statement the guard runs with bind parameters (`$1`, `$2`, …). */
export interface Statement {
  readonly text: string;
  readonly values: readonly (string | bigint | number | boolean | null)[];
}

export interface GuardSession<Trx> {
  /**
   * Opens a transaction whose first statement is `checkSql` (values inlined as literals), sent in the
   * same round trip as BEGIN; runs `body`; runs the `closing` statement made of its result, if any;
   * commits. Rolls back on any failure and throws a {@link PhaseError}. A COMMIT that
   * the server answers with ROLLBACK (the body swallowed an SQL error) fails the commit phase.
   */
  transaction<T>(isolation: IsolationLevel, checkSql: string, body: (trx: Trx) => Promise<T>, closing?: (result: T) => string | undefined): Promise<T>;
  /** One statement in its own implicit transaction. */
  query(statement: Statement): Promise<Record<string, unknown>[]>;
  /** Runs `body` in a transaction on one connection; `run` executes statements in it. */
  script(body: (run: (statement: Statement) => Promise<Record<string, unknown>[]>) => Promise<void>): Promise<void>;
}

/** A connection that runs SQL text with the simple-query protocol, answering with the command tag. */
export interface RawConnection {
  exec(text: string): Promise<{ command: string | undefined }>;
  /**
   * The error the connection reported since the transaction began, if the driver lets us hear it
   * (see connection-errors.ts). Absent: only the statements' own failures tell.
   */
  lost?(): Error | undefined;
}

/**
 * The guarded transaction on one connection, shared by every driver.
 *
 * BEGIN and the check travel as one multi-statement simple query, which saves a round trip on every
 * write. If the check raises, the server skips the rest and leaves the transaction aborted; the catch
 * rolls it back. The simple protocol takes no bind parameters, so `checkSql` carries its values as
 * literals (built by `checkCall(...).inline`, check-call.ts).
 */
export async function runGuardedTransaction<Trx, T>(
  connection: RawConnection,
  trx: Trx,
  isolation: IsolationLevel,
  checkSql: string,
  body: (trx: Trx) => Promise<T>,
  closing?: (result: T) => string | undefined,
): Promise<T> {
  let phase: TransactionPhase = 'open';
  let commitSent = false;
  try {
    await connection.exec(`BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}; ${checkSql}`);
    phase = 'body';
    const result = await body(trx);
    // The statement that records what the body produced (a fire's outcome), values inlined: the
    // last one inside the transaction. Its failure, or the failure to make it, is the body's.
    const closingSql = closing?.(result);
    if (closingSql !== undefined) await connection.exec(closingSql);
    phase = 'commit';
    if (failpoints.armed) await failpoints.hit('guard.checked-before-commit');
    // A connection that died while `fn` ran (or while we stood at the failpoint) took its transaction
    // with it: there is nothing to commit, and nothing was applied.
    const lost = connection.lost?.();
    if (lost !== undefined) throw lost;
    commitSent = true;
    const commit = await connection.exec('COMMIT');
    if (commit.command === 'ROLLBACK') throw new CommitRolledBackError();
    return result;
  } catch (err) {
    let broken = connection.lost?.() !== undefined;
    // A COMMIT answered with ROLLBACK already ended the transaction; a lost connection ended it with
    // the backend; anything else needs a ROLLBACK.
    if (!broken && !(err instanceof CommitRolledBackError)) {
      await connection.exec('ROLLBACK').catch(() => {
        broken = true;
      });
    }
    // The server answering COMMIT with an error means it did not commit; a connection that failed
    // under a sent COMMIT may have committed or not.
    throw new PhaseError(phase, err, { connectionBroken: broken, outcomeUnknown: commitSent && broken });
  }
}

/** The server answered COMMIT with ROLLBACK: the body had swallowed an SQL error, nothing was applied. */
class CommitRolledBackError extends Error {
  override readonly name = 'CommitRolledBackError';
  constructor() {
    super('COMMIT was answered with ROLLBACK: the transaction had already failed');
  }
}

/** Bind parameters: bigints travel as decimal strings (exact), cast in SQL with `::bigint`. */
export function toParams(values: Statement['values']): unknown[] {
  return values.map((v) => (typeof v === 'bigint' ? v.toString() : v));
}
