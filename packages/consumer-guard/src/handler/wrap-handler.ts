import type { GuardMetrics, HandlerRunOutcome } from '../metrics/guard-metrics.js';
import { failpoints } from '@fenced/shared/failpoints';
import { createHash } from 'node:crypto';
import {
  isFencedError,
  parseEnvelope,
  verifyEnvelope,
  type FencedLogger,
  type ReceivedEnvelope,
  type StaleTokenError,
  type Token,
  type VerificationKeys,
} from '@fenced/shared';
import { emit } from '@fenced/shared/internal';
import type { GuardPort } from '../guard-port.js';
import type { GuardedWriteContext } from '../write-context.js';

/** The fire a handler or a fenced route runs for, as the envelope named it. */
export interface FireFields {
  /** The envelope's token: every write of this handler is fenced with it. */
  readonly token: Token;
  readonly fireId: string;
  readonly job: string;
  readonly scheduledAt: Date;
  /** The node that dispatched the fire. */
  readonly issuer: string;
  /**
   * A stable key for effects outside the database (emails, HTTP APIs): the same for every dispatch
   * of this fire to this resource. Pass it as the receiving API's idempotency key.
   */
  readonly idempotencyKey: string;
}

/** What a wrapped handler is given besides the payload. */
export interface HandlerContext<Trx> extends FireFields {
  /** Aborts when the caller's signal aborts or `timeoutMs` passes. */
  readonly signal: AbortSignal;
  /**
   * Runs `fn` in one guarded transaction bound to this fire: the token is checked, and the fire id is
   * recorded in the same transaction, so a second dispatch of the fire changes the database once.
   * Call it at most once per handler run.
   */
  guardedWrite<T>(fn: (trx: Trx, ctx: GuardedWriteContext) => Promise<T>): Promise<T>;
}

export type GuardedHandler<Trx, T> = (payload: unknown, ctx: HandlerContext<Trx>) => Promise<T>;

/** The outcome of one wrapped-handler call. */
export type HandlerOutcome<T> =
  | { readonly status: 'applied'; readonly fireId: string; readonly token: Token; readonly result: T }
  | { readonly status: 'duplicate'; readonly fireId: string; readonly token: Token }
  | { readonly status: 'stale'; readonly fireId: string; readonly token: Token; readonly highest: Token };

export interface HandlerOptions {
  /**
   * What a stale envelope does: throw `StaleTokenError`, or resolve `{ status: 'stale' }` (right for
   * queue processors, where a throw means "retry").
   * @defaultValue `'throw'`
   */
  readonly onStale?: 'throw' | 'return';
  /** Aborts `ctx.signal` after this many milliseconds. */
  readonly timeoutMs?: number;
}

export type WrappedHandler<T> = (envelope: unknown, call?: { signal?: AbortSignal }) => Promise<HandlerOutcome<T>>;

/** How the wrapper validates envelopes. */
export interface HandlerSettings {
  /** Verification keys by key id: when given, only envelopes signed by one of them are accepted. */
  readonly keys: VerificationKeys | undefined;
  readonly maxPayloadBytes: number;
  readonly logger: FencedLogger | undefined;
  /** Counts and times each run (the guard's instruments, on the global meter provider unless given one). */
  readonly metrics: GuardMetrics;
}

/** The idempotency key of a fire on a resource: stable, opaque, 43 characters. */
export function idempotencyKey(resource: string, fireId: string): string {
  return createHash('sha256').update(`fenced-idempotency-v1\n${resource}\n${fireId}`).digest('base64url');
}

/**
 * Wraps a task handler: the one layer that knows envelopes, above the guard's port. In order:
 * validate the envelope (shared schema, payload size; its token parsed there, the only parse of the
 * call), verify its signature when the guard has keys (before the token is even looked at), refuse a
 * stale token before the handler starts (the port's pre-check), run the handler; its
 * `ctx.guardedWrite` is the port's write, which fences for real and claims the fire id.
 */
export function wrapHandler<Trx, T>(
  guard: GuardPort<Trx>,
  settings: HandlerSettings,
  handler: GuardedHandler<Trx, T>,
  options: HandlerOptions = {},
): WrappedHandler<T> {
  if (typeof handler !== 'function') throw new TypeError('wrapHandler: handler must be a function');
  const onStale = options.onStale ?? 'throw';
  const metrics = settings.metrics;

  const run: WrappedHandler<T> = async (input, call = {}) => {
    const envelope = receiveEnvelope(input, settings, guard.resource);
    const started = performance.now();
    // Parsed with the envelope: a Token from here down, never parsed again.
    const token = envelope.token;
    const fireId = envelope.fireId;

    const staleOutcome = (err: StaleTokenError): HandlerOutcome<T> => {
      if (onStale === 'throw') throw err;
      return { status: 'stale', fireId, token, highest: err.highest };
    };

    try {
      await guard.precheck(token, fireId);
    } catch (err) {
      if (isFencedError(err, 'STALE_TOKEN')) return staleOutcome(err);
      throw err;
    }
    if (failpoints.armed) await failpoints.hit('handler.prechecked-before-write');

    const ctx = handlerContext<Trx>(envelope, guard.resource, call.signal, options.timeoutMs, started, (fn) => guard.guardedWrite(token, fireId, fn, envelope.issuer));
    try {
      const result = await handler(envelope.payload, ctx);
      return { status: 'applied', fireId, token, result };
    } catch (err) {
      if (isFencedError(err, 'STALE_TOKEN')) return staleOutcome(err);
      if (isFencedError(err, 'DUPLICATE_FIRE') && err.fireId === fireId) return { status: 'duplicate', fireId, token };
      throw err;
    }
  };
  return async (input, call) => {
    const startedAt = performance.now();
    try {
      const outcome = await run(input, call);
      metrics.handler(startedAt, guard.resource, outcome.status);
      return outcome;
    } catch (err) {
      metrics.handler(startedAt, guard.resource, handlerFailureOf(err));
      throw err;
    }
  };
}

/**
 * The one edge of an envelope on the receiving side: validated (shared schema, payload size; its
 * token parsed there, the only parse of the call), its signature verified when the guard has keys
 * (before the token is even looked at); a refusal is reported and thrown.
 */
export function receiveEnvelope(input: unknown, settings: HandlerSettings, resource: string): ReceivedEnvelope {
  try {
    const envelope = parseEnvelope(input, settings.maxPayloadBytes);
    if (settings.keys !== undefined) verifyEnvelope(envelope, settings.keys);
    return envelope;
  } catch (err) {
    const fireId = typeof (input as { fireId?: unknown } | null)?.fireId === 'string' ? (input as { fireId: string }).fireId : undefined;
    emit(settings.logger, { type: 'envelope.refused', resource, code: (err as { code?: string }).code ?? 'UNKNOWN', ...(fireId ? { fireId } : {}) });
    throw err;
  }
}

/**
 * The context a handler gets for one fire; `write` is its one guarded write (called at most once).
 * The signal and the key are built on first use: most handlers never touch them, and on the hot path
 * an AbortController costs more than the envelope's validation.
 */
export function handlerContext<Trx>(
  envelope: ReceivedEnvelope,
  resource: string,
  callSignal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  started: number,
  write: <R>(fn: (trx: Trx, ctx: GuardedWriteContext) => Promise<R>) => Promise<R>,
): HandlerContext<Trx> {
  let wrote = false;
  let signal: AbortSignal | undefined;
  let key: string | undefined;
  return {
    token: envelope.token,
    fireId: envelope.fireId,
    job: envelope.job,
    scheduledAt: new Date(envelope.scheduledAt),
    issuer: envelope.issuer,
    get idempotencyKey() {
      return (key ??= idempotencyKey(resource, envelope.fireId));
    },
    get signal() {
      return (signal ??= combineSignals(callSignal, timeoutMs, started));
    },
    guardedWrite(fn) {
      if (wrote) throw new Error("ctx.guardedWrite may be called once per handler run: put all of the fire's writes in one transaction");
      wrote = true;
      return write(fn);
    },
  };
}

/**
 * How a run that threw reads as an outcome: refused before it started (its envelope: a bad token in
 * one is INVALID_ENVELOPE), stale, or failed. An INVALID_TOKEN is the handler's own or its store's
 * (a token it passed, a token the store answered), so a failure.
 */
export function handlerFailureOf(err: unknown): HandlerRunOutcome {
  if (isFencedError(err, 'STALE_TOKEN')) return 'stale';
  if (isFencedError(err, 'INVALID_ENVELOPE') || isFencedError(err, 'BAD_SIGNATURE')) return 'refused';
  return 'failed';
}

/** The caller's signal and the handler timeout (counted from when the call started), as one signal. */
function combineSignals(callSignal: AbortSignal | undefined, timeoutMs: number | undefined, startedAt: number): AbortSignal {
  const signals: AbortSignal[] = [];
  if (callSignal !== undefined) signals.push(callSignal);
  // AbortSignal.timeout takes whole milliseconds only (a fraction throws RangeError): rounded up, so
  // the signal never aborts before the timeout.
  if (timeoutMs !== undefined) signals.push(AbortSignal.timeout(Math.max(0, Math.ceil(timeoutMs - (performance.now() - startedAt)))));
  // Built once per run, and only when read: of none, a signal that never aborts.
  return AbortSignal.any(signals);
}
