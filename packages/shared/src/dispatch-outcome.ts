import { FencedErrorCode, isFencedError } from './errors.js';
import { parseToken } from './token.js';
import type { Token } from './token-type.js';

/**
 * How one dispatch of a fire ended, as the scheduler reads it from the handler. The scheduler owns
 * delivery: it dispatches a fire again until the fire is settled.
 *
 * - `applied`: the fire took effect. Settled.
 * - `duplicate`: the fire had already taken effect (an earlier dispatch, perhaps by an earlier term):
 *   success. Settled.
 * - `stale`: refused because a later term wrote (or took the lease): this term no longer leads. The
 *   term ends (the coordinator raises its store's counter above `highest`, the fence's token, when
 *   it is known, and holds a new election); the fire is the next term's to catch up.
 * - `failed-retryable`: nothing took effect (a killed session, a database restarting, a pool timed
 *   out, a service that answered 503). Dispatched again after a backoff, while the term lasts and the
 *   fire is inside the catch-up window; the job's later fires wait behind it.
 * - `failed-permanent`: given up on purpose; never dispatched again, reported as `fire.given-up`.
 */
export type DispatchOutcome =
  | { readonly status: 'applied' }
  | { readonly status: 'duplicate' }
  | { readonly status: 'stale'; readonly highest?: Token }
  | { readonly status: 'failed-retryable'; readonly error: unknown }
  | { readonly status: 'failed-permanent'; readonly reason: string; readonly error?: unknown };

export type DispatchOutcomeStatus = DispatchOutcome['status'];

const STATUSES: ReadonlySet<string> = new Set<DispatchOutcomeStatus>(['applied', 'duplicate', 'stale', 'failed-retryable', 'failed-permanent']);

const APPLIED: DispatchOutcome = Object.freeze({ status: 'applied' });
const DUPLICATE: DispatchOutcome = Object.freeze({ status: 'duplicate' });
const STALE: DispatchOutcome = Object.freeze({ status: 'stale' });

/**
 * What a handler's resolved value says of its fire:
 * - an object whose `status` is a {@link DispatchOutcomeStatus} (a wrapped handler's outcome:
 *   `{ status: 'applied' | 'duplicate' | 'stale', … }`) says so;
 * - an answer of a fenced HTTP service (`sendFire`'s `FireResponse`: a numeric `status` and the
 *   `Fenced-Outcome` header as `outcome`) by that header: `applied` and `replayed` are applied,
 *   `duplicate` is a duplicate, `stale` is stale; any other answer (`unavailable`, `refused`, a 5xx
 *   without the header) failed and is retried, except a 2xx without the header (a service that
 *   does not fence), which is applied;
 * - anything else (undefined, a result) is applied.
 */
export function outcomeOfResult(value: unknown): DispatchOutcome {
  if (typeof value !== 'object' || value === null) return APPLIED;
  const status = (value as { status?: unknown }).status;
  if (typeof status === 'string' && STATUSES.has(status)) return outcomeOfStatus(value as { status: DispatchOutcomeStatus; reason?: unknown; error?: unknown; highest?: unknown });
  if (typeof status === 'number' && 'outcome' in value) return outcomeOfAnswer(status, (value as { outcome?: unknown }).outcome);
  return APPLIED;
}

/**
 * What a handler's throw says of its fire: a stale token or a lease held by a later term is `stale`,
 * a fire already applied (`DUPLICATE_FIRE`) a `duplicate`, a {@link FireGivenUpError}
 * `failed-permanent`; anything else failed and is retried.
 */
export function outcomeOfError(error: unknown): DispatchOutcome {
  if (isFencedError(error, FencedErrorCode.STALE_TOKEN)) return { status: 'stale', highest: error.highest };
  if (isFencedError(error, FencedErrorCode.NOT_LEADER)) return STALE;
  if (isFencedError(error, FencedErrorCode.DUPLICATE_FIRE)) return DUPLICATE;
  if (isFencedError(error, FencedErrorCode.FIRE_GIVEN_UP)) return { status: 'failed-permanent', reason: error.reason, error };
  return { status: 'failed-retryable', error };
}

function outcomeOfStatus(value: { status: DispatchOutcomeStatus; reason?: unknown; error?: unknown; highest?: unknown }): DispatchOutcome {
  switch (value.status) {
    case 'applied':
      return APPLIED;
    case 'duplicate':
      return DUPLICATE;
    case 'stale':
      return staleAbove(value.highest);
    case 'failed-retryable':
      return { status: 'failed-retryable', error: value.error };
    case 'failed-permanent':
      return { status: 'failed-permanent', reason: typeof value.reason === 'string' ? value.reason : 'given up by the handler', error: value.error };
  }
}

/**
 * A wrapped handler's stale outcome carries the fence's token (the coordinator repairs above it).
 * Parsed here, at the edge, once: a handler's own object may carry anything, and what is no token is
 * left out, never trusted.
 */
function staleAbove(highest: unknown): DispatchOutcome {
  if (typeof highest !== 'bigint') return STALE;
  try {
    return { status: 'stale', highest: parseToken(highest) };
  } catch {
    return STALE;
  }
}

function outcomeOfAnswer(httpStatus: number, outcome: unknown): DispatchOutcome {
  if (outcome === 'applied' || outcome === 'replayed') return APPLIED;
  if (outcome === 'duplicate') return DUPLICATE;
  if (outcome === 'stale') return STALE;
  if (outcome === undefined && httpStatus >= 200 && httpStatus < 300) return APPLIED;
  return { status: 'failed-retryable', error: new Error(`the service answered HTTP ${httpStatus}${typeof outcome === 'string' ? ` (${outcome})` : ''}`) };
}
