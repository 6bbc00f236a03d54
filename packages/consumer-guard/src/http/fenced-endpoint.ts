import { FIRE_HEADER, isFencedError, parseFireHeader, verifyFire, type FencedLogger, type ReceivedFire, type VerificationKeys } from '@fenced/shared';
import { emit } from '@fenced/shared/internal';
import type { GuardPort } from '../guard-port.js';
import { idempotencyKey, type FireFields } from '../handler/wrap-handler.js';
import type { GuardedWriteContext } from '../write-context.js';
import { errorReply, type ErrorBody, type FireOutcome } from './error-replies.js';

/** What an adapter hands the endpoint: the request's headers (names in lower case, as node:http gives them) and its parsed body. */
export interface FireRequest {
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  readonly body: unknown;
}

/** What a route answers: recorded with the fire's claim, and answered again to every retry of the fire. */
export interface RouteReply {
  /** An HTTP status, 200-599. */
  readonly status: number;
  /** A JSON value (what the adapter sends as `application/json`); absent for an empty body. */
  readonly body?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/** The fire a request carries, as the route sees it. */
export interface FireContext extends FireFields {
  /** The request's parsed body. */
  readonly body: unknown;
  /** The guarded write's context: the resource, and the attempt (above 1 when the database aborted an earlier one). */
  readonly write: GuardedWriteContext;
}

/** A fenced route: runs inside the guarded write of its fire, on the service's own database. */
export type FencedRouteHandler<Trx> = (trx: Trx, fire: FireContext) => Promise<RouteReply>;

export type { FireOutcome };

/** The endpoint's answer, for an adapter to send as it is. */
export interface FencedReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** A JSON value, or undefined for an empty body. */
  readonly body: unknown;
  readonly outcome: FireOutcome;
}

/** A request in, the reply to send out. The route's own errors (not the guard's) reject, for the framework to answer. */
export type FencedEndpoint = (request: FireRequest) => Promise<FencedReply>;

export interface RouteOptions {
  /**
   * The largest reply recorded, in bytes of its JSON form: a larger one fails the route (its write
   * rolls back), since a retry could not be answered with it.
   * @defaultValue 65536
   */
  readonly maxReplyBytes?: number;
}

/** How the endpoint checks what it is sent: the guard's. */
export interface EndpointSettings {
  /** When given, only fires signed by one of these keys are accepted (401 otherwise). */
  readonly keys: VerificationKeys | undefined;
  readonly logger: FencedLogger | undefined;
}

/** The header each reply carries: how the endpoint answered, for callers and proxies' logs. */
export const OUTCOME_HEADER = 'fenced-outcome';

/**
 * The service side of a fenced HTTP call, independent of any framework (the adapters in
 * `adapters.ts` are thin): verify the `Fenced-Fire` header (400 when missing or malformed, 401 when
 * unsigned or badly signed), then run the route inside the guarded write of the fire on the
 * service's own database, its reply recorded with the fire's claim in the same transaction. A lower
 * token than the resource's fence is refused in that transaction (409 `STALE_TOKEN`, nothing run); a
 * fire the resource already applied answers the reply recorded the first time, without running the
 * route again (`Fenced-Outcome: replayed`); a database that fails answers 503.
 *
 * No pre-check: the route is the write, so the write's own check is the first and only one; a
 * service opts into the Redis fast path by giving its guard a Redis client.
 */
export function fencedEndpoint<Trx>(port: GuardPort<Trx>, settings: EndpointSettings, handler: FencedRouteHandler<Trx>, options: RouteOptions = {}): FencedEndpoint {
  if (typeof handler !== 'function') throw new TypeError('wrapRoute: handler must be a function');
  const maxReplyBytes = options.maxReplyBytes ?? 65_536;
  if (!Number.isInteger(maxReplyBytes) || maxReplyBytes < 1) throw new TypeError('wrapRoute: maxReplyBytes must be a positive integer');

  /** The fire in the request, verified; or the reply refusing it. */
  function receive(request: FireRequest): ReceivedFire | FencedReply {
    const header = request.headers[FIRE_HEADER];
    try {
      const fire = parseFireHeader(header);
      if (settings.keys !== undefined) verifyFire(fire, settings.keys);
      return fire;
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'INVALID_ENVELOPE';
      emit(settings.logger, { type: 'envelope.refused', resource: port.resource, code });
      return refusal(err);
    }
  }

  /**
   * The reply recorded the first time `fire` was applied, if it was applied with its own token by a
   * fenced route (another write may have recorded text of its own, or nothing).
   */
  async function replayOf(fire: ReceivedFire): Promise<FencedReply | undefined> {
    const applied = await port.appliedOutcome(fire.fireId);
    if (applied === null || applied.outcome === null || applied.token !== fire.token) return undefined;
    const recorded = recordedReply(applied.outcome);
    return recorded === undefined ? undefined : reply(recorded.status, recorded.body, 'replayed', recorded.headers);
  }

  return async (request) => {
    const received = receive(request);
    if (!('fireId' in received)) return received;
    const fire = received;
    const scheduledAt = new Date(fire.scheduledAt);
    let key: string | undefined;
    const route = async (trx: Trx, write: GuardedWriteContext): Promise<RouteReply> => {
      const context: FireContext = {
        token: fire.token,
        fireId: fire.fireId,
        job: fire.job,
        scheduledAt,
        issuer: fire.issuer,
        get idempotencyKey() {
          return (key ??= idempotencyKey(port.resource, fire.fireId));
        },
        body: request.body,
        write,
      };
      return checkedReply(await handler(trx, context));
    };
    const record = (routeReply: RouteReply): string => {
      const text = JSON.stringify({ status: routeReply.status, body: routeReply.body, headers: routeReply.headers });
      const bytes = Buffer.byteLength(text, 'utf8');
      if (bytes > maxReplyBytes) throw new RangeError(`the route's reply is ${bytes} bytes as JSON, more than maxReplyBytes (${maxReplyBytes}): a retry could not be answered with it`);
      return text;
    };
    try {
      const routeReply = await port.guardedWrite(fire.token, fire.fireId, route, fire.issuer, record);
      return reply(routeReply.status, routeReply.body, 'applied', routeReply.headers);
    } catch (err) {
      if (isFencedError(err, 'STALE_TOKEN') || isFencedError(err, 'DUPLICATE_FIRE')) {
        // A retry of a fire this token applied is answered as the first time, even after a later
        // term raised the fence (the fence is checked first in the write, so it says stale).
        let replay: FencedReply | undefined;
        try {
          replay = await replayOf(fire);
        } catch (readError) {
          // The first reply may exist and could not be read: a retry is safe, a 409 could be taken as final.
          if (isFencedError(readError, 'GUARD_UNAVAILABLE')) return refusal(readError);
          throw readError;
        }
        return replay ?? refusal(err);
      }
      if (isFencedError(err, 'NOT_LEADER') || isFencedError(err, 'GUARD_UNAVAILABLE')) return refusal(err);
      throw err;
    }
  };
}

/** A reply as a fenced route recorded it, or undefined when the text is not one. */
function recordedReply(text: string): RouteReply | undefined {
  try {
    const value = JSON.parse(text) as RouteReply;
    return typeof value === 'object' && value !== null && Number.isInteger(value.status) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** A route's reply, checked before it is recorded: a bad one fails the route, and its write rolls back. */
function checkedReply(value: RouteReply): RouteReply {
  if (typeof value !== 'object' || value === null) throw new TypeError('a fenced route must return { status, body?, headers? }');
  if (!Number.isInteger(value.status) || value.status < 200 || value.status > 599) throw new TypeError(`a fenced route's status must be an integer in 200..599, got ${String(value.status)}`);
  if (value.headers !== undefined) {
    for (const [name, text] of Object.entries(value.headers)) {
      if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(name) || typeof text !== 'string' || /[\r\n]/.test(text)) throw new TypeError(`a fenced route's header ${JSON.stringify(name)} is not a valid header`);
    }
  }
  return value;
}

function reply(status: number, body: unknown, outcome: FireOutcome, headers: Readonly<Record<string, string>> = {}): FencedReply {
  return { status, body, outcome, headers: { ...headers, [OUTCOME_HEADER]: outcome } };
}

/** A fenced refusal as its reply (error-replies.ts). */
function refusal(err: unknown): FencedReply {
  const { status, outcome, body, headers }: { status: number; outcome: FireOutcome; body: ErrorBody; headers?: Record<string, string> } = errorReply(err);
  return reply(status, body, outcome, headers);
}
