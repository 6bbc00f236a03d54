import { isFencedError } from '@fenced/shared';
import type { HandlerOutcome, WrappedHandler } from '../handler/wrap-handler.js';

/**
 * What a queue job comes to: the outcome's status, `'stale'` also when the handler was wrapped with
 * the default `onStale: 'throw'` (a stale token never becomes fresh, so the job must not be retried).
 * Any other failure throws, for the queue to retry. Shared by the queue adapters.
 */
export async function settledStatus<T>(handle: WrappedHandler<T>, envelope: unknown, signal: AbortSignal | undefined): Promise<HandlerOutcome<T>['status']> {
  try {
    return (await handle(envelope, signal === undefined ? {} : { signal })).status;
  } catch (err) {
    if (isFencedError(err, 'STALE_TOKEN')) return 'stale';
    throw err;
  }
}
