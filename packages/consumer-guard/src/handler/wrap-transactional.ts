import type { GuardPort } from '../guard-port.js';
import type { TransactionExecutor } from '../write-context.js';
import { wrapHandler, type GuardedHandler, type HandlerOptions, type HandlerOutcome, type HandlerSettings } from './wrap-handler.js';

/**
 * A wrapped handler for a queue that hands each job its own transaction (pg-boss's `transactional`
 * workers): `ctx.guardedWrite` runs in `tx`, so the fire's effect, its claim and the job's completion
 * commit together or not at all.
 */
export type TransactionalHandler<T> = (envelope: unknown, tx: TransactionExecutor, call?: { signal?: AbortSignal }) => Promise<HandlerOutcome<T>>;

/**
 * `wrapHandler` over a port whose write is bound to each job's transaction. Stale and duplicate fires
 * resolve with their status (`onStale: 'return'`), so the queue commits the job as done instead of
 * retrying it.
 */
export function wrapTransactionalHandler<T>(
  portIn: (tx: TransactionExecutor) => GuardPort<TransactionExecutor>,
  settings: HandlerSettings,
  handler: GuardedHandler<TransactionExecutor, T>,
  options: Omit<HandlerOptions, 'onStale'> = {},
): TransactionalHandler<T> {
  if (typeof handler !== 'function') throw new TypeError('wrapTransactionalHandler: handler must be a function');
  return (envelope, tx, call) => wrapHandler(portIn(tx), settings, handler, { ...options, onStale: 'return' })(envelope, call);
}
