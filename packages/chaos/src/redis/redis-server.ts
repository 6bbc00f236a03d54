import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, fstatSync, mkdtempSync, openSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trackChild } from '../process/child-registry.js';
import { freePort, waitForPort } from '../ports.js';
import { redisCommand } from './redis-command.js';

/** A private redis-server on a loopback port, without persistence unless asked. */
export interface RedisServerProcess {
  readonly port: number;
  readonly url: string;
  /** The OS process, while running. */
  readonly process: ChildProcess | undefined;
  /** Whether it is stopped by SIGSTOP right now. */
  readonly paused: boolean;
  /**
   * Stops it (SIGTERM, after a SIGCONT if it was paused), waits for the exit and removes its working
   * directory: the end of this server.
   */
  stop(): Promise<void>;
  /** Kills it at once (SIGKILL): no shutdown, no save; its directory (a Cluster node's config) stays. */
  kill(): Promise<void>;
  /**
   * Starts it again on the same port, with the same arguments: without persistence it comes back
   * empty, but a Cluster node keeps its identity (nodes.conf).
   */
  start(): Promise<void>;
  /** SIGSTOP: frozen, its connections open and silent (a GC pause, a hung VM). */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /**
   * What it logged (every start of it, in order), its last `maxBytes` at most; empty once stopped (its
   * directory is gone with it) or before it logged anything. Kept with a failed simulation run.
   */
  log(maxBytes?: number): string;
}

/** How much of a server's log a failed run keeps: its tail, where the fault was. */
const LOG_TAIL_BYTES = 256 * 1024;

export interface RedisServerOptions {
  /** A port to use; default: a free one. */
  readonly port?: number;
  /** More `redis-server` arguments, for example `['--replicaof', '127.0.0.1', '6380']`. */
  readonly args?: readonly string[];
  /** The binary. @defaultValue `'redis-server'` */
  readonly binary?: string;
  /** A config file to start from (a Sentinel needs one it can rewrite). */
  readonly configFile?: string;
  /** Run as a Sentinel (`--sentinel`). */
  readonly sentinel?: boolean;
}

/** Starts a redis-server; `stop()` it when done (tests and the simulation never leave one behind). */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServerProcess> {
  const port = options.port ?? (await freePort());
  // Its own working directory: a Cluster node writes nodes.conf there, a Sentinel its config.
  const dir = mkdtempSync(join(tmpdir(), `fenced-redis-${port}-`));
  const logFile = join(dir, 'redis.log');
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--logfile', logFile, ...(options.args ?? [])];
  let child: ChildProcess | undefined;
  let paused = false;

  const exited = (c: ChildProcess) => new Promise<void>((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve())));
  const end = async (signal: NodeJS.Signals) => {
    const c = child;
    child = undefined;
    if (c === undefined) return;
    const done = exited(c);
    c.kill(signal);
    if (paused) c.kill('SIGCONT'); // a stopped process acts on SIGTERM only once it runs again
    paused = false;
    await done;
  };

  const handle: RedisServerProcess = {
    port,
    url: `redis://127.0.0.1:${port}`,
    get process() {
      return child;
    },
    get paused() {
      return paused;
    },
    async stop() {
      await end('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
    kill: () => end('SIGKILL'),
    pause() {
      if (child === undefined || paused) return;
      child.kill('SIGSTOP');
      paused = true;
    },
    resume() {
      if (child === undefined || !paused) return;
      child.kill('SIGCONT');
      paused = false;
    },
    log: (maxBytes = LOG_TAIL_BYTES) => tailOf(logFile, maxBytes),
    async start() {
      if (child !== undefined) return;
      const c = spawn(options.binary ?? 'redis-server', [...(options.configFile === undefined ? [] : [options.configFile]), ...args, ...(options.sentinel ? ['--sentinel'] : [])], { stdio: 'ignore', cwd: dir });
      child = c;
      trackChild(c);
      const failed = new Promise<never>((_, reject) => {
        c.once('error', (err) => reject(new Error(`cannot start redis-server: ${err.message}`)));
        c.once('exit', (code, signal) => reject(new Error(`redis-server on port ${port} exited at start (${signal ?? code}): ${lastWarnings(logFile)}`)));
      });
      // Its exit after a later stop rejects this too: nobody waits on it then.
      failed.catch(() => {});
      try {
        await Promise.race([waitForPort(port), failed]);
        // The port answering is not proof that this server bound it: one that could not (the port
        // taken while this one was down) exits, and the wait found the other. Whoever answers must
        // be this process.
        const answering = await Promise.race([processIdOn(port), failed]);
        if (answering !== c.pid) throw new Error(`port ${port} is answered by another redis-server (pid ${answering}), not the one started (pid ${c.pid})`);
      } catch (error) {
        if (child === c) await end('SIGKILL');
        throw error;
      }
    },
  };
  await handle.start();
  return handle;
}

/** The last two warnings a server logged (`#` lines): why it could not start, say a port it could not bind. */
function lastWarnings(logFile: string): string {
  return tailOf(logFile, 2048).split('\n').filter((line) => / # /.test(line)).slice(-2).map((line) => line.slice(line.indexOf(' # ') + 3)).join('; ');
}

/** The pid of the Redis server (or Sentinel) answering on `port`, from its `INFO server`. */
async function processIdOn(port: number): Promise<number | undefined> {
  const info = String(await redisCommand(port, ['INFO', 'server'], 10_000));
  const match = /^process_id:(\d+)\r?$/m.exec(info);
  return match === null ? undefined : Number(match[1]);
}

/** The last `maxBytes` of a file, as text (from the first whole line); empty when there is none. */
function tailOf(file: string, maxBytes: number): string {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return '';
  }
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, maxBytes);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    const text = buffer.toString('utf8');
    return length < size ? text.slice(text.indexOf('\n') + 1) : text;
  } finally {
    closeSync(fd);
  }
}
