import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { trackChild } from '../process/child-registry.js';

/** A private redis-server on a loopback port, without persistence unless asked. */
export interface RedisServerProcess {
  readonly port: number;
  readonly url: string;
  /** The OS process, while running. */
  readonly process: ChildProcess | undefined;
  /** Stops it (SIGTERM) and waits for the exit. */
  stop(): Promise<void>;
  /** Kills it at once (SIGKILL): no shutdown, no save. */
  kill(): Promise<void>;
  /** Starts it again on the same port, with the same arguments (and so, without persistence, empty). */
  start(): Promise<void>;
}

export interface RedisServerOptions {
  /** A port to use; default: a free one. */
  readonly port?: number;
  /** More `redis-server` arguments, for example `['--replicaof', '127.0.0.1', '6380']`. */
  readonly args?: readonly string[];
  /** The binary. @defaultValue `'redis-server'` */
  readonly binary?: string;
}

/** A free TCP port on 127.0.0.1 (the OS picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Resolves once something accepts TCP connections on the port, or rejects after `timeoutMs`. */
export async function waitForPort(port: number, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => {
        socket.destroy();
        resolve(false);
      });
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Starts a redis-server; `stop()` it when done (tests and the simulation never leave one behind). */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServerProcess> {
  const port = options.port ?? (await freePort());
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', '/tmp', ...(options.args ?? [])];
  let child: ChildProcess | undefined;

  const exited = (c: ChildProcess) => new Promise<void>((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve())));
  const end = async (signal: NodeJS.Signals) => {
    const c = child;
    child = undefined;
    if (c === undefined) return;
    const done = exited(c);
    c.kill(signal);
    await done;
  };

  const handle: RedisServerProcess = {
    port,
    url: `redis://127.0.0.1:${port}`,
    get process() {
      return child;
    },
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    async start() {
      if (child !== undefined) return;
      const c = spawn(options.binary ?? 'redis-server', args, { stdio: 'ignore' });
      child = c;
      trackChild(c);
      const failed = new Promise<never>((_, reject) => c.once('error', (err) => reject(new Error(`cannot start redis-server: ${err.message}`))));
      await Promise.race([waitForPort(port), failed]);
    },
  };
  await handle.start();
  return handle;
}
