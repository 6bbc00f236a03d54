import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trackChild } from '../process/child-registry.js';
import { freePort, waitForPort } from '../redis/redis-server.js';

/**
 * A private PostgreSQL server on a loopback port, in a data directory of its own: for faults that
 * the shared server must not take (a restart in the middle of writes), which every other test uses.
 */
export interface PostgresServerProcess {
  readonly port: number;
  /** postgres://postgres@127.0.0.1:<port>/postgres (trust authentication, loopback only). */
  readonly url: string;
  /** Whether the postmaster is running. */
  readonly running: boolean;
  /** Fast shutdown (SIGINT: every session is ended, the transactions in flight roll back), waiting for the exit. */
  shutdown(): Promise<void>;
  /** Starts it again on the same port and data directory; resolves once it accepts connections. */
  start(): Promise<void>;
  /** A fast shutdown and a start: what an operator's restart or a failover does to the sessions. */
  restart(): Promise<void>;
  /** Shuts it down and removes its data directory: the end of this server. */
  stop(): Promise<void>;
}

export interface PostgresServerOptions {
  /** A port to use; default: a free one. */
  readonly port?: number;
  /** More settings, as `-c name=value` pairs. */
  readonly settings?: Readonly<Record<string, string>>;
}

/** The directory of PostgreSQL's server binaries (Debian keeps them out of the PATH). */
export function postgresBinDir(): string {
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
    if (existsSync(join(dir, 'initdb'))) return dir;
  } catch {
    // No pg_config on the PATH: look where Debian installs each major version.
  }
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const version of versions) {
    const dir = join(root, version, 'bin');
    if (existsSync(join(dir, 'initdb'))) return dir;
  }
  throw new Error('no PostgreSQL server binaries (initdb, postgres): install postgresql (Debian: apt-get install postgresql)');
}

/** PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}

/** Creates a data directory (initdb, a few seconds) and starts the server on it; `stop()` it when done. */
export async function startPostgresServer(options: PostgresServerOptions = {}): Promise<PostgresServerProcess> {
  const bin = postgresBinDir();
  const user = serverUser();
  const port = options.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), `fenced-postgres-${port}-`));
  if (user !== undefined) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  execFileSync(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'], {
    stdio: 'ignore',
    ...(user ?? {}),
  });
  const settings = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: dir,
    fsync: 'off',
    synchronous_commit: 'off',
    full_page_writes: 'off',
    max_connections: '50',
    shared_buffers: '16MB',
    ...options.settings,
  };
  const args = ['-D', data, '-p', String(port), ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
  let child: ChildProcess | undefined;

  const exited = (c: ChildProcess) => new Promise<void>((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve())));

  const handle: PostgresServerProcess = {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    async shutdown() {
      const c = child;
      child = undefined;
      if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
      const done = exited(c);
      c.kill('SIGINT');
      await done;
    },
    async start() {
      if (handle.running) return;
      const c = spawn(join(bin, 'postgres'), args, { stdio: 'ignore', ...(user ?? {}) });
      child = c;
      trackChild(c);
      const failed = new Promise<never>((_, reject) => {
        c.once('error', (err) => reject(new Error(`cannot start postgres: ${err.message}`)));
        c.once('exit', (code, signal) => reject(new Error(`postgres exited at start (${signal ?? code})`)));
      });
      // Its exit after a later shutdown rejects this too: nobody waits on it then.
      failed.catch(() => {});
      await Promise.race([waitForPort(port, 30_000), failed]);
      // The port opens before recovery ends; a connection is refused (57P03) until then.
      await Promise.race([waitUntilReady(bin, port, user), failed]);
    },
    async restart() {
      await handle.shutdown();
      await handle.start();
    },
    async stop() {
      await handle.shutdown();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await handle.start();
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return handle;
}

async function waitUntilReady(bin: string, port: number, user: { uid: number; gid: number } | undefined): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ready = await new Promise<boolean>((resolve) => {
      const c = spawn(join(bin, 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(port)], { stdio: 'ignore', ...(user ?? {}) });
      c.once('exit', (code) => resolve(code === 0));
      c.once('error', () => resolve(false));
    });
    if (ready) return;
    if (Date.now() > deadline) throw new Error(`postgres on 127.0.0.1:${port} is not ready after 30 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
