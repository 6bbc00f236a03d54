/**
 * The ledger service: an HTTP service of the team's own that the scheduled job calls, one process
 * for the whole run (the simulation faults its callers, not it). Every call posts one entry.
 *
 * MODE=guarded is the service on fenced: the route is `guard.wrapRoute`, which checks the fire's
 * signed token in the entry's own transaction and answers a retried fire with its first reply.
 * MODE=control is the service as the team ran it before: it trusts its callers and inserts what it
 * is sent, without a fence or a dedupe.
 *
 * Prints `{"kind":"listening","port":…}` once it serves on 127.0.0.1. The simulation's service-down
 * scenario puts it into a fault with a line on stdin, `{"fault":"unavailable"}` (every call answered
 * 503 before anything is done), `{"fault":"answer-lost"}` (every call carried out, then its
 * connection dropped unanswered: a proxy's timeout in front of a service that committed) or
 * `{"fault":null}`, and it prints `{"kind":"fault","fault":…}` once it acts on it.
 * Env: MODE, DATABASE_URL, SIM_SCHEMA, SIGNING_KEY.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { createGuard } from '@fenced/consumer-guard';
import { toNodeListener } from '@fenced/consumer-guard/http';
import { KEY_ID, RESOURCE } from './names.js';
import { env } from '../sim-support.js';

const mode = env('MODE');
const schema = env('SIM_SCHEMA');
const pool = new pg.Pool({ connectionString: env('DATABASE_URL'), options: `-c search_path=${schema}`, max: 8 });
pool.on('error', () => {});
const INSERT = 'INSERT INTO entries (fire_id, token, caller, scheduled_at) VALUES ($1, $2, $3, $4) RETURNING id::text AS id';

let listener: (req: IncomingMessage, res: ServerResponse) => void;
if (mode === 'guarded') {
  const guard = createGuard({ db: pool, resource: RESOURCE, schema, keys: { [KEY_ID]: env('SIGNING_KEY') } });
  listener = toNodeListener(
    guard.wrapRoute(async (client, fire) => {
      const caller = String((fire.body as { caller?: unknown } | undefined)?.caller ?? 'unknown');
      const { rows } = await client.query(INSERT, [fire.fireId, fire.token.toString(), caller, fire.scheduledAt.toISOString()]);
      return { status: 201, body: { entry: rows[0].id } };
    }),
  );
} else if (mode === 'control') {
  listener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void (async () => {
        const call = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { fireId: string; token: string; caller: string; scheduledAt: number };
        const { rows } = await pool.query(INSERT, [call.fireId, call.token, call.caller, new Date(call.scheduledAt).toISOString()]);
        res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ entry: rows[0].id }));
      })().catch(() => res.writeHead(500).end());
    });
  };
} else {
  throw new Error(`MODE must be guarded or control, not ${mode}`);
}

/** The fault the simulation put the service into, or null (see the header). */
let fault: 'unavailable' | 'answer-lost' | null = null;
createInterface({ input: process.stdin }).on('line', (text) => {
  const asked = (JSON.parse(text) as { fault?: unknown }).fault;
  fault = asked === 'unavailable' || asked === 'answer-lost' ? asked : null;
  process.stdout.write(`${JSON.stringify({ kind: 'fault', fault })}\n`);
});

/** The route behind the simulation's faults. */
function faulty(route: (req: IncomingMessage, res: ServerResponse) => void) {
  return (req: IncomingMessage, res: ServerResponse) => {
    if (fault === 'unavailable') {
      req.resume();
      res.writeHead(503, { 'content-type': 'text/plain', 'retry-after': '1' }).end('unavailable');
      return;
    }
    if (fault === 'answer-lost') {
      // The work is done in full; whatever the route answers never reaches the caller.
      const drop = () => {
        req.socket.destroy();
        return res;
      };
      res.writeHead = drop as typeof res.writeHead;
      res.write = (() => true) as typeof res.write;
      res.end = drop as typeof res.end;
    }
    route(req, res);
  };
}

const server = createServer(faulty(listener));
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ kind: 'listening', port: (server.address() as AddressInfo).port })}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => void pool.end().finally(() => process.exit(0)));
});
