import type { HandlerOutcome, WrappedHandler } from '../handler/wrap-handler.js';
import { settledStatus } from './settled-status.js';

/**
 * A BullMQ processor from a wrapped handler: `new Worker(name, toProcessor(handle), …)`. Stale and
 * duplicate fires complete (they must not be retried); the outcome's status is the job's result.
 */
export function toProcessor<T>(handle: WrappedHandler<T>): (job: { data: unknown }, token?: string, signal?: AbortSignal) => Promise<HandlerOutcome<T>['status']> {
  return (job, _token, signal) => settledStatus(handle, job.data, signal);
}
