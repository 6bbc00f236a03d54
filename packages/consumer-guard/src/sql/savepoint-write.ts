import type { TransactionExecutor } from '../write-context.js';

// The savepoint that lets a refusal inside someone else's transaction leave that transaction usable.
const SAVEPOINT = 'fenced_guarded_write';

/** What a SQL store does at each step of a write inside a transaction the caller holds. */
export interface SavepointWriteSteps<T> {
  /** Runs after the savepoint is set: may prove the caller's transaction is open (MySQL's autocommit). */
  opened?(tx: TransactionExecutor, savepoint: string): Promise<void>;
  /** The fence check (and fire claim, and lease check): statements that refuse by raising an error. */
  check(tx: TransactionExecutor): Promise<void>;
  /** The statement recording `fn`'s result beside the fire's claim, if there is one to record. */
  recordOutcome?(tx: TransactionExecutor, result: T): Promise<void>;
  /** The store's typed refusal for a check's error, or undefined when it is not a refusal. */
  refusalOf(cause: unknown): Error | undefined;
  /** The store's failure for an error in `phase` ('open': nothing applied; 'body': at the savepoint's release). */
  unavailable(phase: 'open' | 'body', cause: unknown): Error;
}

/**
 * The check, then `body`, in a transaction the caller holds and commits, under a savepoint: a refusal
 * or failure of the check goes back to the savepoint, so only the guard's part is undone (a raise the
 * check made before it refused a claim included) and the caller's transaction goes on. The fence row's
 * lock stays until the caller's transaction ends. No retry: an aborted transaction is the caller's to
 * run again. `body`'s own errors pass through untouched.
 */
export async function writeUnderSavepoint<T>(tx: TransactionExecutor, steps: SavepointWriteSteps<T>, body: () => Promise<T>): Promise<T> {
  try {
    await tx.executeSql(`SAVEPOINT ${SAVEPOINT}`);
    await steps.opened?.(tx, SAVEPOINT);
  } catch (err) {
    if (err instanceof TypeError) throw err;
    throw steps.unavailable('open', err);
  }
  try {
    await steps.check(tx);
  } catch (err) {
    // If the caller's transaction is already gone (a queue that gave up on a job past its expiry, a
    // deadlock that rolled it all back), going back fails: the refusal or failure stands all the
    // same, nothing of ours was applied, and the caller's commit is what fails.
    await tx.executeSql(`ROLLBACK TO SAVEPOINT ${SAVEPOINT}`).catch(() => {});
    throw steps.refusalOf(err) ?? steps.unavailable('open', err);
  }
  const result = await body();
  await steps.recordOutcome?.(tx, result);
  try {
    await tx.executeSql(`RELEASE SAVEPOINT ${SAVEPOINT}`);
  } catch (err) {
    throw steps.unavailable('body', err);
  }
  return result;
}
