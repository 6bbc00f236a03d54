import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trackChild } from '../process/child-registry.js';
import { freePort, waitForPort } from '../ports.js';
import { expectListening } from '../process/socket-owner.js';

/**
 * A private MariaDB (or MySQL) server on a loopback port, in a data directory of its own: what the
 * MySQL fence store's tests and the simulation run against, and what takes faults (a restart, a
 * freeze) without touching any server of the machine's.
 */
export interface MariadbServerProcess {
  readonly port: number;
  /** mysql://root@127.0.0.1:<port>/<database> (root without a password, loopback only). */
  readonly url: string;
  /** The database created at the start (`fenced`). */
  readonly database: string;
  readonly running: boolean;
  /** A clean shutdown (SIGTERM: InnoDB rolls back what is in flight), waiting for the exit. */
  shutdown(): Promise<void>;
  /** Starts it again on the same port and data directory; resolves once it answers. */
  start(): Promise<void>;
  restart(): Promise<void>;
  /** Shuts it down and removes its data directory. */
  stop(): Promise<void>;
  /** SIGSTOP: the whole server frozen, its connections open and silent (one process: threads, not forks). */
  pause(): void;
  resume(): void;
}

export interface MariadbServerOptions {
  readonly port?: number;
  /** More server options, as `--name=value`. */
  readonly settings?: Readonly<Record<string, string>>;
}

/** How long a shutdown waits for the server to exit after SIGTERM before it sends SIGKILL. */
const SHUTDOWN_GRACE_MS = 30_000;

/** Resolves once the server on `port` answers a query (the `mariadb` client, each try bounded). */
async function answering(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  // The port first (a cheap probe, no client spawned while nothing listens), then a query: one deadline for both.
  await waitForPort(port, timeoutMs);
  for (;;) {
    const answered = await new Promise<boolean>((resolve) =>
      execFile('mariadb', ['--no-defaults', '--connect-timeout=5', '-h', '127.0.0.1', '-P', String(port), '-u', 'root', '-e', 'SELECT 1'], { timeout: 10_000 }, (err) => resolve(err === null)),
    );
    if (answered) return;
    if (Date.now() > deadline) throw new Error(`the MariaDB on 127.0.0.1:${port} answered no query in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The server binary: mariadbd (Debian's mariadb-server), else mysqld. */
export function mariadbBinary(): { server: string; installDb: string } {
  for (const dir of ['/usr/sbin', '/usr/bin', '/usr/local/bin', '/usr/local/mysql/bin']) {
    const server = join(dir, 'mariadbd');
    if (existsSync(server)) return { server, installDb: findOnPath('mariadb-install-db') };
  }
  throw new Error('no MariaDB server binary (mariadbd): install mariadb-server (Debian: apt-get install mariadb-server)');
}

function findOnPath(name: string): string {
  for (const dir of ['/usr/bin', '/usr/sbin', '/usr/local/bin', '/usr/scripts']) {
    if (existsSync(join(dir, name))) return join(dir, name);
  }
  throw new Error(`no ${name}: install mariadb-server (Debian: apt-get install mariadb-server)`);
}

/** Creates a data directory (mariadb-install-db, about a second) and starts the server on it. */
export async function startMariadbServer(options: MariadbServerOptions = {}): Promise<MariadbServerProcess> {
  const { server, installDb } = mariadbBinary();
  const port = options.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), `fenced-mariadb-${port}-`));
  const data = join(dir, 'data');
  // A temporary directory of its own, for the install's bootstrap too: at start a server deletes every
  // `#sql*` file in its tmpdir as its own leftovers, and in a shared /tmp those are other servers' live
  // temporary tables (a query of information_schema on the machine's MariaDB then failed: "Error on
  // delete of '/tmp/#sql-temptable-…'", whenever a test started or restarted a server of its own).
  const temporary = join(dir, 'tmp');
  mkdirSync(temporary);
  // As root the server runs as root (--user=root); otherwise as whoever runs the tests.
  const asRoot = process.getuid?.() === 0;
  const user = asRoot ? ['--user=root'] : [];
  execFileSync(installDb, ['--no-defaults', `--datadir=${data}`, `--tmpdir=${temporary}`, '--auth-root-authentication-method=normal', '--skip-test-db', ...user], { stdio: 'ignore' });
  const settings: Record<string, string> = {
    'bind-address': '127.0.0.1',
    port: String(port),
    socket: join(dir, 'mysqld.sock'),
    'pid-file': join(dir, 'mysqld.pid'),
    'log-error': join(dir, 'error.log'),
    tmpdir: temporary,
    'innodb-buffer-pool-size': '64M',
    // Durability is not what these tests are about: flush once a second, not at every commit.
    'innodb-flush-log-at-trx-commit': '0',
    'skip-name-resolve': 'ON',
    'max-connections': '300',
    ...options.settings,
  };
  const args = ['--no-defaults', `--datadir=${data}`, ...user, ...Object.entries(settings).map(([k, v]) => `--${k}=${v}`)];
  let child: ChildProcess | undefined;
  let frozen = false;
  const exited = (c: ChildProcess) => new Promise<void>((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve())));

  const handle: MariadbServerProcess = {
    port,
    database: 'fenced',
    url: `mysql://root@127.0.0.1:${port}/fenced`,
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    async shutdown() {
      handle.resume();
      const c = child;
      child = undefined;
      if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
      const done = exited(c);
      c.kill('SIGTERM');
      // A server that takes SIGTERM while it starts can hang for good (seen with MariaDB 10.11: the
      // signal consumed, every thread asleep, no connection answered). A test must not wait on it.
      const timer = setTimeout(() => c.kill('SIGKILL'), SHUTDOWN_GRACE_MS);
      await done;
      clearTimeout(timer);
    },
    async start() {
      if (handle.running) return;
      const c = spawn(server, args, { stdio: 'ignore' });
      child = c;
      trackChild(c);
      const failed = new Promise<never>((_, reject) => {
        c.once('error', (err) => reject(new Error(`cannot start mariadbd: ${err.message}`)));
        c.once('exit', (code, signal) => reject(new Error(`mariadbd exited at start (${signal ?? code}); see ${settings['log-error']}`)));
      });
      failed.catch(() => {});
      // Listening is not ready: the port opens before the server has read its grant tables, and a
      // shutdown sent in between can hang it. Started means a query answered.
      await Promise.race([answering(port, 60_000), failed]);
      // Whoever answers must be this server (a port taken while it was down: see expectListening).
      await Promise.race([expectListening(c.pid!, port, 'mariadbd'), failed]);
    },
    async restart() {
      await handle.shutdown();
      await handle.start();
    },
    async stop() {
      await handle.shutdown();
      rmSync(dir, { recursive: true, force: true });
    },
    pause() {
      if (child?.pid === undefined || frozen) return;
      process.kill(child.pid, 'SIGSTOP');
      frozen = true;
    },
    resume() {
      if (child?.pid === undefined || !frozen) return;
      process.kill(child.pid, 'SIGCONT');
      frozen = false;
    },
  };
  try {
    await handle.start();
    execFileSync('mariadb', ['--no-defaults', '-h', '127.0.0.1', '-P', String(port), '-u', 'root', '-e', 'CREATE DATABASE IF NOT EXISTS fenced'], { stdio: 'ignore' });
  } catch (err) {
    await handle.shutdown().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return handle;
}
