import net from 'node:net';

/**
 * What the proxy does with traffic:
 * - `pass`: forwards both ways.
 * - `delay`: forwards each chunk after `delayMs`.
 * - `stall`: holds every byte (both ways) until the mode changes, then delivers them in order: a
 *   connection that is up but silent, like a long network delay. Writes that were in flight arrive
 *   late, which is exactly what fencing must survive.
 * - `drop`: accepts connections and silently discards everything (half-open: the client sees an
 *   established connection that never answers).
 * - `cut`: resets every connection and refuses new ones.
 */
export type ProxyMode = { kind: 'pass' } | { kind: 'delay'; delayMs: number } | { kind: 'stall' } | { kind: 'drop' } | { kind: 'cut' };

/** A loopback TCP proxy in front of one upstream, whose behaviour can change while connections are live. */
export interface FaultProxy {
  readonly port: number;
  readonly mode: ProxyMode;
  /** Changes the behaviour; leaving `stall` delivers what was held. */
  setMode(mode: ProxyMode): void;
  /** Points new (and, with `reconnect`, existing: they are reset) connections at another upstream port. */
  retarget(upstreamPort: number, options?: { reset?: boolean }): void;
  /** Destroys every live connection (clients reconnect, to the current target). */
  resetConnections(): void;
  close(): Promise<void>;
}

interface Pipe {
  client: net.Socket;
  upstream: net.Socket;
  held: Array<{ to: 'client' | 'upstream'; chunk: Buffer }>;
}

/** Starts a proxy on a free loopback port that forwards to `127.0.0.1:upstreamPort`. */
export async function startFaultProxy(upstreamPort: number, options: { host?: string } = {}): Promise<FaultProxy> {
  const host = options.host ?? '127.0.0.1';
  let target = upstreamPort;
  let mode: ProxyMode = { kind: 'pass' };
  const pipes = new Set<Pipe>();

  const deliver = (pipe: Pipe, to: 'client' | 'upstream', chunk: Buffer) => {
    const socket = to === 'client' ? pipe.client : pipe.upstream;
    if (!socket.destroyed) socket.write(chunk);
  };

  const forward = (pipe: Pipe, to: 'client' | 'upstream', chunk: Buffer) => {
    switch (mode.kind) {
      case 'pass':
        if (pipe.held.length > 0) pipe.held.push({ to, chunk });
        else deliver(pipe, to, chunk);
        return;
      case 'delay': {
        const ms = mode.delayMs;
        pipe.held.push({ to, chunk });
        // Keep order: each chunk leaves `ms` after it arrived, and never before the ones ahead of it.
        setTimeout(() => {
          const next = pipe.held.shift();
          if (next !== undefined) deliver(pipe, next.to, next.chunk);
        }, ms);
        return;
      }
      case 'stall':
        pipe.held.push({ to, chunk });
        return;
      case 'drop':
        return;
      case 'cut':
        pipe.client.destroy();
        pipe.upstream.destroy();
        return;
    }
  };

  const server = net.createServer((client) => {
    if (mode.kind === 'cut') {
      client.resetAndDestroy();
      return;
    }
    client.setNoDelay(true);
    const upstream = net.connect({ host, port: target });
    upstream.setNoDelay(true);
    const pipe: Pipe = { client, upstream, held: [] };
    pipes.add(pipe);
    const close = () => {
      pipes.delete(pipe);
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk) => forward(pipe, 'upstream', chunk));
    upstream.on('data', (chunk) => forward(pipe, 'client', chunk));
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
  });
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;

  const resetConnections = () => {
    for (const pipe of [...pipes]) {
      pipe.client.resetAndDestroy();
      pipe.upstream.destroy();
      pipes.delete(pipe);
    }
  };

  return {
    port,
    get mode() {
      return mode;
    },
    setMode(next) {
      const previous = mode;
      mode = next;
      if (next.kind === 'cut') resetConnections();
      if ((previous.kind === 'stall' || previous.kind === 'drop') && (next.kind === 'pass' || next.kind === 'delay')) {
        for (const pipe of pipes) {
          const held = pipe.held.splice(0);
          if (previous.kind === 'stall') for (const { to, chunk } of held) forward(pipe, to, chunk);
        }
      }
    },
    retarget(upstreamPort, retargetOptions = {}) {
      target = upstreamPort;
      if (retargetOptions.reset !== false) resetConnections();
    },
    resetConnections,
    close: () =>
      new Promise<void>((resolve) => {
        resetConnections();
        server.close(() => resolve());
      }),
  };
}
