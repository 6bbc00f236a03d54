import type { WrappedHandler } from '../handler/wrap-handler.js';
import { settledStatus } from './settled-status.js';

/** The part of graphile-worker's `JobHelpers` the task reads. */
export interface GraphileJobHelpersLike {
  readonly abortSignal?: AbortSignal;
}

/**
 * A graphile-worker task from a wrapped handler (the outcome goes to the guard's logger events): `run({ taskList: { invoices: toGraphileTask(handle) } })`.
 * The job's payload is the fenced envelope. Stale and duplicate fires resolve, so graphile-worker
 * completes the job instead of retrying it (a stale token never becomes fresh); any other failure
 * throws, and graphile-worker retries the job with its backoff.
 *
 * The write cannot share the job's completion here: graphile-worker deletes a finished job in its own
 * statement after the task returns (batched, on its own connection), so the handler writes in the
 * guard's transaction, and the fire claim makes a second run of the job change nothing.
 */
export function toGraphileTask<T>(handle: WrappedHandler<T>): (payload: unknown, helpers: GraphileJobHelpersLike) => Promise<void> {
  return async (payload, helpers) => {
    await settledStatus(handle, payload, helpers.abortSignal);
  };
}
