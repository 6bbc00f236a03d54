import { readFileSync } from 'node:fs';
import net from 'node:net';

/**
 * Where a server the toolkit starts gets its port. A port is picked free here and bound by the
 * server a moment later, in another process; a port from the kernel's ephemeral range can be taken
 * in between by any outgoing connection on the machine (every client of every test picks its local
 * port there), and the server then fails to bind, or worse, the wait for its port finds the other
 * socket. Below the ephemeral range only a listener asking for that very port can take it: ports are
 * picked at random there and checked by binding them.
 */
const LOWEST = 10_000;

/** Where the kernel's ephemeral range starts (Linux), or the IANA one where it cannot be read. */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(low)) return low;
  } catch {
    // not Linux: fall through
  }
  return 49_152;
}

/** Binds 127.0.0.1:`port` (0: the kernel picks) and frees it again; the port, or null if it was taken. */
function tryPort(port: number): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' || err.code === 'EACCES' ? resolve(null) : reject(err)));
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as net.AddressInfo;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * Ports this process handed out lately, and until when they stay promised: a port is free to bind
 * until its server binds it, so two runs side by side in one process (`pnpm sim --parallel`) could
 * otherwise both be handed it in that moment.
 */
const promised = new Map<number, number>();
const PROMISE_MS = 120_000;

/** Hands out `port` unless this process promised it lately; true when it is now promised. */
function promise(port: number): boolean {
  const now = Date.now();
  for (const [p, until] of promised) if (until <= now) promised.delete(p);
  if (promised.has(port)) return false;
  promised.set(port, now + PROMISE_MS);
  return true;
}

/** A free TCP port on 127.0.0.1, below the ephemeral range when there is room (see above). */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  if (low - LOWEST >= 1000) {
    for (let attempt = 0; attempt < 50; attempt++) {
      const candidate = LOWEST + Math.floor(Math.random() * (low - LOWEST));
      if (!promise(candidate)) continue;
      const port = await tryPort(candidate);
      if (port !== null) return port;
      promised.delete(candidate);
    }
  }
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await tryPort(0);
    if (port === null) break;
    if (promise(port)) return port;
  }
  throw new Error('no free port on 127.0.0.1');
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
