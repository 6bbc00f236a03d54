import type { IncomingMessage, ServerResponse } from 'node:http';
import { readStatus, type StatusSource } from './read-status.js';
import { statusPageHtml } from './status-page-html.js';

export interface StatusHandlerOptions extends StatusSource {
  /** How often the page refreshes itself. @defaultValue 2000 */
  readonly refreshMs?: number;
}

/**
 * A request handler for `node:http` (or Express, or anything that passes Node's request and
 * response): `GET /` is the status page, `GET /status.json` what it shows. Mount it under a path of
 * your own; the page fetches `status.json` relative to itself. It only reads.
 *
 * @example
 * ```ts
 * import { createServer } from 'node:http';
 * createServer(createStatusHandler({ redis: { kind: 'single', client: redis, url }, pool, keyPrefix: 'fenced', schema: 'public', table: 'fenced_fences' })).listen(9470, '127.0.0.1');
 * ```
 */
export function createStatusHandler(options: StatusHandlerOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const page = statusPageHtml(options.refreshMs ?? 2000);
  return (req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path.endsWith('/status.json')) {
      readStatus(options).then(
        (status) => {
          res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' }).end(JSON.stringify(status));
        },
        (err: unknown) => {
          res.writeHead(503, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify({ error: err instanceof Error ? err.message : String(err) }));
        },
      );
      return;
    }
    if (path.endsWith('/')) {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'" }).end(page);
      return;
    }
    res.writeHead(404).end();
  };
}
