import { request as httpRequest, type Agent, type ClientRequest, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { encodeFireHeader, FIRE_HEADER, parseEnvelope } from '@fenced/shared';
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
  readonly signal?: AbortSignal;
  readonly agent?: Agent;
}

/** What a fenced service answered. */
export interface FireResponse {
  readonly status: number;
  /** The service's `Fenced-Outcome`: applied, replayed, stale, duplicate, refused, unavailable (undefined when absent). */
  readonly outcome: string | undefined;
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
  const text = options.body === undefined ? undefined : JSON.stringify(options.body);
  const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(target, {
    method: options.method ?? 'POST',
    headers: {
      ...options.headers,
      ...headers,
      ...(text === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) }),
    },
    ...(options.agent === undefined ? {} : { agent: options.agent }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
  const answered = new Promise<FireResponse>((resolve, reject) => {
    request.once('error', reject);
    request.once('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('error', reject);
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
        resolve({ status: response.statusCode ?? 0, outcome: typeof outcome === 'string' ? outcome : undefined, headers: response.headers, body });
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
