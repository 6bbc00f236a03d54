import { GuardUnavailableError, isFencedError, type ReceivedEnvelope } from '@fenced/shared';
import type { GuardPort } from '../guard-port.js';
import type { TransactionExecutor } from '../write-context.js';
import {
  handlerContext,
  handlerFailureOf,
  receiveEnvelope,
  wrapHandler,
  type GuardedHandler,
  type HandlerOptions,
  type HandlerOutcome,
  type HandlerSettings,
} from './wrap-handler.js';

/**
 * A wrapped handler for a queue that hands each job its own transaction (pg-boss's `transactional`
 * workers): `ctx.guardedWrite` runs in `tx`, so the fire's effect, its claim and the job's completion
 * commit together or not at all. `batch` runs a whole batch of jobs that share one transaction.
 */
export interface TransactionalHandler<T> {
  (envelope: unknown, tx: TransactionExecutor, call?: { signal?: AbortSignal }): Promise<HandlerOutcome<T>>;
  /**
   * The jobs of one batch, in one transaction, in order: one check for the whole batch, a verdict per
   * job, then each claimed job's handler (see {@link wrapTransactionalHandler}). Resolves with each
   * job's outcome; a malformed envelope or a handler's own error throws, for the queue to roll the
   * batch back and retry it.
   */
  batch(envelopes: readonly unknown[], tx: TransactionExecutor, calls?: ReadonlyArray<{ signal?: AbortSignal } | undefined>): Promise<Array<HandlerOutcome<T>>>;
}

/**
 * `wrapHandler` over a port whose write is bound to each job's transaction. Stale and duplicate fires
 * resolve with their status (`onStale: 'return'`), so the queue commits the job as done instead of
 * retrying it.
 *
 * A batch, on a store that checks batches (PostgreSQL without `checkLease`): one job after another
 * each pays a savepoint (so that a refusal leaves the transaction usable), the check, a release and
 * a pre-check; here the whole batch is checked by one statement answering a verdict per job, before
 * any handler starts, so no job raises and no savepoint is needed. The check is the authority the
 * pre-check only advises, so there is no pre-check either. Elsewhere, `batch` runs the jobs one by one.
 */
export function wrapTransactionalHandler<T>(
  portIn: (tx: TransactionExecutor) => GuardPort<TransactionExecutor>,
  settings: HandlerSettings,
  handler: GuardedHandler<TransactionExecutor, T>,
  options: Omit<HandlerOptions, 'onStale'> = {},
): TransactionalHandler<T> {
  if (typeof handler !== 'function') throw new TypeError('wrapTransactionalHandler: handler must be a function');
  const one = (envelope: unknown, tx: TransactionExecutor, call?: { signal?: AbortSignal }) =>
    wrapHandler(abandonable(portIn(tx), call?.signal), settings, handler, { ...options, onStale: 'return' })(envelope, call);

  async function batch(envelopes: readonly unknown[], tx: TransactionExecutor, calls: ReadonlyArray<{ signal?: AbortSignal } | undefined> = []): Promise<Array<HandlerOutcome<T>>> {
    const port = portIn(tx);
    const outcomes: Array<HandlerOutcome<T>> = [];
    if (port.checkBatch === undefined || envelopes.length === 0) {
      for (const [i, envelope] of envelopes.entries()) outcomes.push(await one(envelope, tx, calls[i]));
      return outcomes;
    }
    const startedAt = performance.now();
    const received: ReceivedEnvelope[] = envelopes.map((input) => {
      try {
        return receiveEnvelope(input, settings, port.resource);
      } catch (err) {
        settings.metrics.handler(startedAt, port.resource, 'refused');
        throw err;
      }
    });
    const verdicts = await port.checkBatch(received.map((e) => ({ token: e.token, fireId: e.fireId })));
    for (const [i, envelope] of received.entries()) {
      const { token, fireId } = envelope;
      const { verdict, fence } = verdicts[i]!;
      const outcome = verdict === 'claimed' ? await runClaimed(envelope, tx, port.resource, calls[i]?.signal, startedAt) : verdict === 'stale' ? { status: 'stale' as const, fireId, token, highest: fence } : { status: 'duplicate' as const, fireId, token };
      settings.metrics.handler(startedAt, port.resource, outcome.status);
      outcomes.push(outcome);
    }
    return outcomes;
  }

  /** A claimed job's handler: its guarded write is its statements in `tx`, the check already made. */
  async function runClaimed(envelope: ReceivedEnvelope, tx: TransactionExecutor, resource: string, signal: AbortSignal | undefined, startedAt: number): Promise<HandlerOutcome<T>> {
    const { token, fireId } = envelope;
    const ctx = handlerContext<TransactionExecutor>(envelope, resource, signal, options.timeoutMs, startedAt, async (fn) =>
      whileHeld(signal, resource, fireId, () => fn(tx, { token, resource, attempt: 1 })),
    );
    try {
      return { status: 'applied', fireId, token, result: await handler(envelope.payload, ctx) };
    } catch (err) {
      // A guard of another resource the handler called may refuse; the batch's own check is done.
      if (isFencedError(err, 'STALE_TOKEN')) return { status: 'stale', fireId, token, highest: err.highest };
      settings.metrics.handler(startedAt, resource, handlerFailureOf(err));
      throw err;
    }
  }

  return Object.assign(one, { batch });
}

/**
 * The port with its write refusing to run the caller's statements once the job's signal aborted (the
 * fence check and the claim ran under their savepoint first; see {@link whileHeld}).
 */
function abandonable(port: GuardPort<TransactionExecutor>, signal: AbortSignal | undefined): GuardPort<TransactionExecutor> {
  if (signal === undefined) return port;
  return {
    ...port,
    guardedWrite: (token, fireId, fn, issuer, recordOutcome) =>
      port.guardedWrite(token, fireId, async (tx, ctx) => whileHeld(signal, port.resource, fireId, () => fn(tx, ctx)), issuer, recordOutcome),
  };
}

/**
 * Runs a job's statements unless its queue gave up on it. A queue that does (pg-boss past the job's
 * expiry) aborts the job's signal and rolls the transaction back under the handler; the connection
 * then runs the next statements on their own, each committing by itself, so nothing of the job may
 * be written after that.
 */
function whileHeld<R>(signal: AbortSignal | undefined, resource: string, fireId: string, write: () => Promise<R>): Promise<R> {
  if (signal?.aborted) {
    throw new GuardUnavailableError(`the queue gave up on fire ${JSON.stringify(fireId)} of ${JSON.stringify(resource)} (its signal aborted) and ended its transaction before the write: nothing of the write was applied`, { cause: undefined });
  }
  return write();
}
