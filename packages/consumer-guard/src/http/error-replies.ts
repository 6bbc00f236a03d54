import { isFencedError } from '@fenced/shared';

/** Every value of the `Fenced-Outcome` header. */
export const FIRE_OUTCOMES = ['applied', 'replayed', 'stale', 'duplicate', 'refused', 'unavailable'] as const;

/** How a fenced endpoint answered (its `Fenced-Outcome` header). */
export type FireOutcome = (typeof FIRE_OUTCOMES)[number];

/**
 * The JSON body of every refusal a fenced endpoint answers (docs/http-fire-header.md): a code a
 * caller in any language can switch on, a message for people, and the fields of the code. Tokens are
 * decimal strings, as on the wire.
 */
export interface ErrorBody {
  readonly error: {
    readonly code: string;
    readonly message: string;
    readonly [field: string]: unknown;
  };
}

/** A refusal of the endpoint (the guard's typed errors, or a malformed request) as status, outcome and body. */
export function errorReply(err: unknown): { status: number; outcome: FireOutcome; body: ErrorBody; headers?: Record<string, string> } {
  const message = err instanceof Error ? err.message : String(err);
  if (isFencedError(err, 'STALE_TOKEN')) {
    return { status: 409, outcome: 'stale', body: { error: { code: err.code, message, resource: err.resource, token: err.token.toString(), highest: err.highest.toString() } } };
  }
  if (isFencedError(err, 'DUPLICATE_FIRE')) {
    return { status: 409, outcome: 'duplicate', body: { error: { code: err.code, message, resource: err.resource, fireId: err.fireId } } };
  }
  if (isFencedError(err, 'NOT_LEADER')) {
    return { status: 409, outcome: 'stale', body: { error: { code: err.code, message, lease: err.lease } } };
  }
  if (isFencedError(err, 'BAD_SIGNATURE')) {
    return { status: 401, outcome: 'refused', body: { error: { code: err.code, message, reason: err.reason } } };
  }
  if (isFencedError(err, 'INVALID_ENVELOPE')) {
    return { status: 400, outcome: 'refused', body: { error: { code: err.code, message, issues: err.issues } } };
  }
  if (isFencedError(err, 'INVALID_TOKEN')) {
    return { status: 400, outcome: 'refused', body: { error: { code: err.code, message } } };
  }
  if (isFencedError(err, 'GUARD_UNAVAILABLE')) {
    // Nothing was applied, or the commit's outcome is unknown: either way a retry is safe, since the
    // fire's claim makes it apply once (and answers the first reply if it already did).
    return { status: 503, outcome: 'unavailable', body: { error: { code: err.code, message } }, headers: { 'retry-after': '1' } };
  }
  // The header parser throws only typed errors; anything else is still a request refused, not run.
  return { status: 400, outcome: 'refused', body: { error: { code: 'INVALID_ENVELOPE', message } } };
}
