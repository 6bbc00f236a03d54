import net from 'node:net';

/**
 * What the proxy does with traffic:
 * - `pass`: forwards both ways.
 * - `delay`: forwards each chunk `delayMs` after it arrived, in order; `only` limits the delay to one
 *   direction (`requests`: client to upstream; `replies`: upstream to client), the other passes.
 *   A request delayed on its way out while its reply comes straight back is what a loaded client
 *   sees when its writes sit in a busy event loop: the server acts later than the client thinks.
 * - `stall`: holds every byte (both ways) until the mode changes, then delivers them in order: a
 *   connection that is up but silent, like a long network delay. Writes that were in flight arrive
 *   late, which is exactly what fencing must survive.
 * - `drop`: accepts connections and silently discards everything (half-open: the client sees an
 *   established connection that never answers).
 * - `cut`: resets every connection and refuses new ones.
 */
export type ProxyMode =
  | { kind: 'pass' }
  | { kind: 'delay'; delayMs: number; only?: 'requests' | 'replies' }
  | { kind: 'stall' }
  | { kind: 'drop' }
  | { kind: 'cut' };

/** A loopback TCP proxy in front of one upstream, whose behaviour can change while connections are live. */
export interface FaultProxy {
  readonly port: number;
  readonly mode: ProxyMode;
  /** Bytes held back right now (delayed or stalled), both directions. */
  heldBytes(): number;
  /** Changes the behaviour; leaving `stall` delivers what was held. */
  setMode(mode: ProxyMode): void;
  /** Points new (and, with `reconnect`, existing: they are reset) connections at another upstream port. */
  retarget(upstreamPort: number, options?: { reset?: boolean }): void;
  /** Destroys every live connection (clients reconnect, to the current target). */
  resetConnections(): void;
  /**
   * Refuses connections from the clients `refused` picks by their local port (and resets those it
   * picks among the live ones), whatever the mode; null admits everyone again. One proxy then cuts
   * one direction of one link, as between two members of a cluster.
   */
  refuseFrom(refused: ((clientPort: number) => boolean | Promise<boolean>) | null): void;
  close(): Promise<void>;
}

/** Where a chunk goes: to the client (a reply) or to the upstream (a request). */
type Direction = 'client' | 'upstream';

interface HeldChunk {
  readonly chunk: Buffer;
  /** When it may leave (performance.now()); Infinity while stalled. */
  dueAt: number;
}

interface Pipe {
  /** The client's own port: who connected, for `refuseFrom`. */
  clientPort: number;
  client: net.Socket;
  upstream: net.Socket;
  /** Per direction, chunks not yet delivered, in arrival order: nothing overtakes what is held. */
  held: Record<Direction, HeldChunk[]>;
}

/**
 * Ends a connection with a reset (RST), as a dropped link does, unless its writing side already
 * ended (the peer's FIN ended it here): libuv refuses to reset a socket whose shutdown is still in
 * flight (EINVAL), and Node 20 then leaks the handle, marked closing but never closed, so the
 * process spins at exit waiting for it. Such a socket just closes.
 */
function reset(socket: net.Socket): void {
  if (socket.writableEnded) socket.destroy();
  else socket.resetAndDestroy();
}

/** Whether a refusal check picks the client on `clientPort`; a check that throws lets it through. */
function isRefused(check: (clientPort: number) => boolean | Promise<boolean>, clientPort: number): Promise<boolean> {
  return Promise.resolve()
    .then(() => check(clientPort))
    .catch(() => false);
}

/** Starts a proxy on a free loopback port that forwards to `127.0.0.1:upstreamPort`. */
export async function startFaultProxy(upstreamPort: number, options: { host?: string } = {}): Promise<FaultProxy> {
  const host = options.host ?? '127.0.0.1';
  let target = upstreamPort;
  let mode: ProxyMode = { kind: 'pass' };
  const pipes = new Set<Pipe>();
  let refused: ((clientPort: number) => boolean | Promise<boolean>) | null = null;

  /** Delivers the held chunks that are due, in order; re-arms a timer for the next one. */
  const flush = (pipe: Pipe, to: Direction) => {
    const queue = pipe.held[to];
    const socket = to === 'client' ? pipe.client : pipe.upstream;
    while (queue.length > 0) {
      const wait = queue[0]!.dueAt - performance.now();
      if (wait === Infinity) return; // stalled: setMode delivers it
      if (wait > 0) {
        // Timers may fire a little early against performance.now(): come back when it is due.
        setTimeout(() => flush(pipe, to), Math.ceil(wait));
        return;
      }
      const { chunk } = queue.shift()!;
      if (!socket.destroyed) socket.write(chunk);
    }
  };

  const delays = (to: Direction): number => {
    if (mode.kind !== 'delay') return 0;
    if (mode.only === 'requests' && to !== 'upstream') return 0;
    if (mode.only === 'replies' && to !== 'client') return 0;
    return mode.delayMs;
  };

  const forward = (pipe: Pipe, to: Direction, chunk: Buffer) => {
    switch (mode.kind) {
      case 'pass':
      case 'delay': {
        const ms = delays(to);
        pipe.held[to].push({ chunk, dueAt: performance.now() + ms });
        if (ms > 0) setTimeout(() => flush(pipe, to), ms);
        else flush(pipe, to);
        return;
      }
      case 'stall':
        pipe.held[to].push({ chunk, dueAt: Infinity });
        return;
      case 'drop':
        return;
      case 'cut':
        pipe.client.destroy();
        pipe.upstream.destroy();
        return;
    }
  };

  /** Forwards a connection the proxy lets through. */
  const open = (client: net.Socket) => {
    client.setNoDelay(true);
    const upstream = net.connect({ host, port: target });
    upstream.setNoDelay(true);
    const pipe: Pipe = { clientPort: client.remotePort ?? 0, client, upstream, held: { client: [], upstream: [] } };
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
  };

  const server = net.createServer((client) => {
    if (mode.kind === 'cut') {
      reset(client);
      return;
    }
    const check = refused;
    if (check === null) {
      open(client);
      return;
    }
    // Who connected may take a while to find out (a /proc read): meanwhile the connection waits, unread.
    client.on('error', () => {});
    void isRefused(check, client.remotePort ?? 0).then((refuse) => {
      if (client.destroyed) return;
      // Healed (or refusing others) meanwhile: the refusal in force now decides.
      if ((refuse && refused === check) || mode.kind === 'cut') reset(client);
      else open(client);
    });
  });
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;

  const drop = (pipe: Pipe) => {
    reset(pipe.client);
    pipe.upstream.destroy();
    pipes.delete(pipe);
  };
  const resetConnections = () => {
    for (const pipe of [...pipes]) drop(pipe);
  };

  return {
    port,
    get mode() {
      return mode;
    },
    heldBytes() {
      let bytes = 0;
      for (const pipe of pipes) for (const held of [...pipe.held.client, ...pipe.held.upstream]) bytes += held.chunk.length;
      return bytes;
    },
    setMode(next) {
      const previous = mode;
      mode = next;
      if (next.kind === 'cut') resetConnections();
      if (previous.kind === 'stall' && next.kind !== 'stall') {
        // Healed: what was held leaves now, in order (dropped again if the new mode drops).
        for (const pipe of pipes) {
          for (const to of ['client', 'upstream'] as const) {
            if (next.kind === 'drop') pipe.held[to].length = 0;
            for (const held of pipe.held[to]) if (held.dueAt === Infinity) held.dueAt = 0;
            flush(pipe, to);
          }
        }
      }
    },
    retarget(upstreamPort, retargetOptions = {}) {
      target = upstreamPort;
      if (retargetOptions.reset !== false) resetConnections();
    },
    resetConnections,
    refuseFrom(next) {
      refused = next;
      if (next === null) return;
      for (const pipe of [...pipes]) {
        void isRefused(next, pipe.clientPort).then((refuse) => {
          if (refuse && refused === next && pipes.has(pipe)) drop(pipe);
        });
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        resetConnections();
        server.close(() => resolve());
      }),
  };
}
