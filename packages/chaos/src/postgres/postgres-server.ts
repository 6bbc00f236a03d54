import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trackChild } from '../process/child-registry.js';
import { freePort, waitForPort } from '../ports.js';
import { expectListening } from '../process/socket-owner.js';

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
  /**
   * SIGSTOP to the postmaster and every backend: the whole server frozen, its connections open and
   * silent (a hung VM). The postmaster first, so that it forks no backend the freeze would miss.
   */
  pause(): void;
  /** SIGCONT to all of it: it goes on where it stopped, still believing what it believed. */
  resume(): void;
  /** Whether it is frozen by `pause()` right now. */
  readonly paused: boolean;
  /** Ends recovery on a streaming replica (`pg_ctl promote`, waiting until it accepts writes). */
  promote(): Promise<void>;
}

export interface PostgresServerOptions {
  /** A port to use; default: a free one. */
  readonly port?: number;
  /** More settings, as `-c name=value` pairs. */
  readonly settings?: Readonly<Record<string, string>>;
  /**
   * A streaming replica of this server (asynchronous, like most deployments): its data directory is
   * a `pg_basebackup -R` of the primary, and it follows the primary until `promote()`.
   */
  readonly replicaOf?: PostgresServerProcess;
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
  const primary = options.replicaOf;
  if (primary === undefined) {
    // initdb's trust authentication covers replication connections from loopback too.
    execFileSync(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'], {
      stdio: 'ignore',
      ...(user ?? {}),
    });
  } else {
    // -R: standby.signal and primary_conninfo, so the copy starts as the primary's streaming replica.
    execFileSync(join(bin, 'pg_basebackup'), ['-D', data, '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-R', '-X', 'stream', '--no-sync', '-c', 'fast'], {
      stdio: 'ignore',
      ...(user ?? {}),
    });
  }
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
  let frozen: number[] = [];

  const exited = (c: ChildProcess) => new Promise<void>((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve())));

  const handle: PostgresServerProcess = {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    async shutdown() {
      handle.resume(); // a frozen postmaster would never act on the SIGINT
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
      // Whoever answers must be this postmaster (a port taken while it was down: see expectListening).
      await Promise.race([expectListening(c.pid!, port, 'postgres'), failed]);
    },
    async restart() {
      await handle.shutdown();
      await handle.start();
    },
    async stop() {
      await handle.shutdown();
      rmSync(dir, { recursive: true, force: true });
    },
    get paused() {
      return frozen.length > 0;
    },
    pause() {
      const pid = child?.pid;
      if (pid === undefined || frozen.length > 0) return;
      process.kill(pid, 'SIGSTOP');
      frozen = [pid, ...childPids(pid)];
      for (const p of frozen.slice(1)) signal(p, 'SIGSTOP');
    },
    resume() {
      for (const p of frozen.reverse()) signal(p, 'SIGCONT');
      frozen = [];
    },
    async promote() {
      execFileSync(join(bin, 'pg_ctl'), ['promote', '-D', data, '-w', '-t', '30'], { stdio: 'ignore', ...(user ?? {}) });
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

/** The processes `pid` forked (a postmaster's backends and auxiliary processes). */
function childPids(pid: number): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.trim() !== '')
      .map(Number);
  } catch {
    return []; // pgrep exits 1 when there are none
  }
}

/** Signals a process that may have exited meanwhile (a backend whose session ended). */
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Gone already.
  }
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
