import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FencedEndpoint, FencedReply } from './fenced-endpoint.js';

// Thin adapters from a framework's request and reply to the endpoint's, and back. Each one reads the
// whole body before the endpoint runs, so no transaction is opened for a request still arriving (a
// caller frozen between its headers and its body holds no lock). Frameworks are typed by the little
// used of them, so none is a dependency.

export interface NodeAdapterOptions {
  /** The largest request body read, in bytes: a larger one is answered 413. @defaultValue 1 MiB */
  readonly maxBodyBytes?: number;
}

const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

/** A request body that cannot be used: answered with its status, the endpoint not called. */
class BodyError extends Error {
  constructor(
    readonly status: 400 | 413,
    readonly code: 'INVALID_BODY' | 'BODY_TOO_LARGE',
    message: string,
  ) {
    super(message);
  }
}

/**
 * A `node:http` request listener over the endpoint: the body is read (JSON when its content type says
 * so, else text; absent when empty), the reply written as JSON. An error of the route answers 500
 * without its message (it is the service's to log: pass `onError`).
 *
 * @example http.createServer(toNodeListener(guard.wrapRoute(async (trx, fire) => ({ status: 201, body: { id } }))))
 */
export function toNodeListener(endpoint: FencedEndpoint, options: NodeAdapterOptions & { onError?: (err: unknown) => void } = {}): (req: IncomingMessage, res: ServerResponse) => void {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  return (req, res) => {
    void (async () => {
      const body = await bodyOrRefusal(req, res, maxBodyBytes);
      if (body !== REFUSED) send(res, await endpoint({ headers: req.headers, body }));
    })().catch((err: unknown) => {
      options.onError?.(err);
      if (!res.headersSent) send(res, { status: 500, headers: {}, body: { error: { code: 'INTERNAL', message: 'the route failed' } }, outcome: 'refused' });
      else res.destroy();
    });
  };
}

/** The little of Express's request used here (a node:http request, with `body` when a body parser ran). */
export interface ExpressRequestLike extends IncomingMessage {
  body?: unknown;
}

/**
 * An Express handler (4 or 5) over the endpoint. With `express.json()` in front, its parsed body is
 * used; without, the body is read here. The route's own errors go to `next`, for the app's error
 * handler.
 */
export function toExpressHandler(endpoint: FencedEndpoint, options: NodeAdapterOptions = {}): (req: ExpressRequestLike, res: ServerResponse, next: (err?: unknown) => void) => void {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  return (req, res, next) => {
    void (async () => {
      // A body parser in front has read the body already.
      const body = req.body !== undefined || req.readableEnded ? req.body : await bodyOrRefusal(req, res, maxBodyBytes);
      if (body !== REFUSED) send(res, await endpoint({ headers: req.headers, body }));
    })().catch(next);
  };
}

/** The little of Fastify's request and reply used here. */
export interface FastifyRequestLike {
  readonly headers: IncomingMessage['headers'];
  readonly body?: unknown;
}
export interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  headers(values: Record<string, string>): FastifyReplyLike;
  send(payload?: unknown): FastifyReplyLike;
}

/**
 * A Fastify route handler (4 or 5) over the endpoint: Fastify has parsed the body; the reply is sent
 * as JSON. The route's own errors reject, for Fastify's error handler.
 *
 * @example app.post('/invoices', toFastifyHandler(guard.wrapRoute(createInvoice)))
 */
export function toFastifyHandler(endpoint: FencedEndpoint): (request: FastifyRequestLike, reply: FastifyReplyLike) => Promise<FastifyReplyLike> {
  return async (request, reply) => {
    const answer = await endpoint({ headers: request.headers, body: request.body });
    reply.code(answer.status).headers(answer.body === undefined ? answer.headers : { ...answer.headers, 'content-type': 'application/json; charset=utf-8' });
    return answer.body === undefined ? reply.send() : reply.send(JSON.stringify(answer.body));
  };
}

function send(res: ServerResponse, reply: FencedReply): void {
  const text = reply.body === undefined ? undefined : JSON.stringify(reply.body);
  res.statusCode = reply.status;
  for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
  if (text !== undefined) {
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.setHeader('content-length', Buffer.byteLength(text));
  }
  res.end(text);
}

const REFUSED = Symbol('refused');

/** The request's body; or, when it cannot be used, its refusal sent and REFUSED. */
async function bodyOrRefusal(req: IncomingMessage, res: ServerResponse, maxBodyBytes: number): Promise<unknown> {
  try {
    return await readBody(req, maxBodyBytes);
  } catch (err) {
    if (!(err instanceof BodyError)) throw err;
    send(res, { status: err.status, headers: { 'fenced-outcome': 'refused' }, body: { error: { code: err.code, message: err.message } }, outcome: 'refused' });
    return REFUSED;
  }
}

/** The whole body: JSON when the content type says so, else text; undefined when empty. */
async function readBody(req: IncomingMessage, maxBodyBytes: number): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > maxBodyBytes) throw new BodyError(413, 'BODY_TOO_LARGE', `the body is ${declared} bytes, at most ${maxBodyBytes} allowed`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBodyBytes) throw new BodyError(413, 'BODY_TOO_LARGE', `the body is over ${maxBodyBytes} bytes`);
    chunks.push(chunk as Buffer);
  }
  if (size === 0) return undefined;
  const text = Buffer.concat(chunks).toString('utf8');
  if (!/\bjson\b/i.test(req.headers['content-type'] ?? '')) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new BodyError(400, 'INVALID_BODY', 'the body is not valid JSON');
  }
}
