import type { TransactionalHandler } from '../handler/wrap-transactional.js';
import type { HandlerOutcome } from '../handler/wrap-handler.js';
import type { TransactionExecutor } from '../write-context.js';

/** The part of a pg-boss `Job` the handler reads. */
export interface PgBossJobLike {
  readonly id: string;
  readonly data: unknown;
  readonly signal?: AbortSignal;
}

/**
 * A pg-boss handler for a **transactional** worker, from `guard.wrapTransactionalHandler(fn)`:
 * ```ts
 * await boss.work('invoices', { transactional: true }, toPgBossHandler(guard.wrapTransactionalHandler(fn)));
 * ```
 * pg-boss runs the handler and the batch's completion in one transaction and hands it over as `tx`;
 * the batch's fence check and fire claims (one statement for the whole batch, a verdict per job, on
 * PostgreSQL without `checkLease`; else one check under a savepoint per job) and each job's writes
 * run in it, so a job's effect commits exactly when the job is marked done. A worker paused past the job's expiry, whose job
 * another worker has since completed, commits nothing: its claim is refused as a duplicate (or its
 * token as stale), and pg-boss's completion of a job it no longer holds changes nothing either.
 * Stale and duplicate fires resolve (the job completes, it is not retried); any other failure throws,
 * which rolls the whole batch back for pg-boss to retry. Resolves with each job's status, in order.
 */
export function toPgBossHandler<T>(handle: TransactionalHandler<T>): (jobs: readonly PgBossJobLike[], tx: TransactionExecutor) => Promise<Array<HandlerOutcome<T>['status']>> {
  return async (jobs, tx) => {
    // One after another: they share one connection and one transaction.
    const outcomes = await handle.batch(
      jobs.map((job) => job.data),
      tx,
      jobs.map((job) => (job.signal === undefined ? undefined : { signal: job.signal })),
    );
    return outcomes.map((outcome) => outcome.status);
  };
}
