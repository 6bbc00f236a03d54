import { request as httpRequest, type Agent, type ClientRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { ConfigError, encodeFireHeader, FIRE_HEADER, parseEnvelope } from '@fenced/shared';
import { FIRE_OUTCOMES, type FireOutcome } from './error-replies.js';
import { failpoints } from '@fenced/shared/failpoints';

/**
 * The caller side of a fenced HTTP call: a job's handler that calls a service of the team's own
 * attaches its fire to the request, and the service checks the token in its own transaction.
 */

/**
 * The headers that carry a fire: `{ 'fenced-fire': … }` (docs/http-fire-header.md), for `fetch`,
 * undici or any client. The envelope is validated first: a malformed one throws here, and nothing
 * is sent.
 *
 * @throws {InvalidEnvelopeError} when `envelope` is not a valid envelope.
 * @example await fetch(url, { method: 'POST', headers: { ...fireHeaders(envelope), 'content-type': 'application/json' }, body })
 */
export function fireHeaders(envelope: unknown): { readonly [FIRE_HEADER]: string } {
  return { [FIRE_HEADER]: encodeFireHeader(parseEnvelope(envelope)) };
}

export interface SendFireOptions {
  /** The fire's envelope, as the scheduler dispatched it (signed, when the service checks signatures). */
  readonly envelope: unknown;
  /** @defaultValue 'POST' */
  readonly method?: string;
  /** Sent as JSON. */
  readonly body?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * Aborts the call (a scheduler's handler passes its `FireContext`'s `signal`, which aborts when the
   * term ends). The call rejects with the signal's reason.
   */
  readonly signal?: AbortSignal;
  /**
   * How long to wait for the whole answer before giving up on this call (it rejects, and a scheduler
   * dispatches the fire again): a service that is frozen, or whose database holds the request, must
   * not hold the job's later fires for ever. Sending the fire again is safe: the service's fire claim
   * applies it once and answers a repeat with its first reply.
   * @defaultValue {@link DEFAULT_SEND_TIMEOUT_MS} (10 s)
   */
  readonly timeoutMs?: number;
  readonly agent?: Agent;
}

/** How long `sendFire` waits for an answer unless told otherwise: 10 s. */
export const DEFAULT_SEND_TIMEOUT_MS = 10_000;

/** The call got no whole answer within its `timeoutMs`: nothing is known of the fire; sending it again is safe. */
export class FireCallTimeoutError extends Error {
  override readonly name = 'FireCallTimeoutError';
  constructor(
    readonly url: string,
    readonly timeoutMs: number,
  ) {
    super(`no answer from ${url} within ${timeoutMs} ms`);
  }
}

/**
 * What a fenced service answered. Returned from a scheduler's handler as it is, it tells the scheduler
 * how the fire went (`outcomeOfResult` in `@fenced/shared`): `applied`, `replayed` and `duplicate`
 * settle the fire, `stale` ends the term's dispatch of the job, anything else is sent again.
 */
export interface FireResponse {
  readonly status: number;
  /** The service's `Fenced-Outcome` (undefined when absent: a service that does not fence). */
  readonly outcome: FireOutcome | undefined;
  readonly headers: IncomingHttpHeaders;
  /** The body, parsed when it is JSON. */
  readonly body: unknown;
}

/**
 * Calls a fenced service with `node:http(s)`: the fire's header, the body as JSON. Resolves with the
 * answer whatever its status (a 409 `stale` means this process no longer leads); rejects only when
 * no answer came. The request's headers go out first, then its body (a failpoint,
 * `http.headers-sent-before-body`, can stop the process between them).
 */
export async function sendFire(url: string | URL, options: SendFireOptions): Promise<FireResponse> {
  const headers = fireHeaders(options.envelope);
  const target = new URL(url);
  const timeoutMs = options.timeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new ConfigError('sendFire', [{ path: 'timeoutMs', message: 'must be a whole number of milliseconds, at least 1' }]);
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = options.signal === undefined ? timeout : AbortSignal.any([options.signal, timeout]);
  const text = options.body === undefined ? undefined : JSON.stringify(options.body);
  const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(target, {
    method: options.method ?? 'POST',
    headers: {
      ...options.headers,
      ...headers,
      ...(text === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) }),
    },
    ...(options.agent === undefined ? {} : { agent: options.agent }),
    signal,
  });
  const answered = new Promise<FireResponse>((resolve, reject) => {
    // The caller's own abort rejects with its reason; the timeout with an error that says so.
    const fail = (err: unknown) => reject(options.signal?.aborted !== true && timeout.aborted ? new FireCallTimeoutError(target.href, timeoutMs) : err);
    request.once('error', fail);
    request.once('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('error', fail);
      response.once('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        let body: unknown = raw === '' ? undefined : raw;
        if (raw !== '' && /\bjson\b/i.test(response.headers['content-type'] ?? '')) {
          try {
            body = JSON.parse(raw);
          } catch {
            // Not JSON after all: the text as it came.
          }
        }
        const outcome = response.headers['fenced-outcome'];
        resolve({ status: response.statusCode ?? 0, outcome: isFireOutcome(outcome) ? outcome : undefined, headers: response.headers, body });
      });
    });
  });
  request.flushHeaders();
  if (failpoints.armed) {
    await headersOnTheWire(request);
    await failpoints.hit('http.headers-sent-before-body');
  }
  request.end(text);
  return answered;
}

/**
 * Resolves once the request's headers have left this process (the socket connected, nothing of it
 * left in Node's buffer): only where a failpoint is armed, so that stopping here stops a request the
 * service has begun to receive.
 */
async function headersOnTheWire(request: ClientRequest): Promise<void> {
  for (;;) {
    const socket = request.socket;
    if (request.headersSent && socket !== null && !socket.connecting && socket.writableLength === 0) return;
    if (request.destroyed) return;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

function isFireOutcome(value: unknown): value is FireOutcome {
  return typeof value === 'string' && (FIRE_OUTCOMES as readonly string[]).includes(value);
}
