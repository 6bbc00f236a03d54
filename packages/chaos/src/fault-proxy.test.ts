import net from 'node:net';
import { waitFor } from '#test-support';
import { afterEach, describe, expect, it } from 'vitest';
import { startFaultProxy, type FaultProxy } from './fault-proxy.js';

// A real echo server behind a real proxy: bytes go through loopback sockets, nothing is mocked.
async function echoServer(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('data', (d) => s.write(d));
    s.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => new Promise((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }),
  };
}

function client(port: number): Promise<{ socket: net.Socket; received: () => string; closed: () => boolean }> {
  return new Promise((resolve, reject) => {
    let data = '';
    let closed = false;
    const socket = net.connect({ host: '127.0.0.1', port }, () => resolve({ socket, received: () => data, closed: () => closed }));
    socket.on('data', (d) => (data += d.toString()));
    socket.on('close', () => (closed = true));
    socket.on('error', () => {});
    socket.once('error', reject);
  });
}

/**
 * How long a negative check watches for bytes that must not arrive. Slowness can only make such a
 * check pass more easily, never fail it; the positive checks wait on their condition instead.
 */
const QUIET_MS = 100;
const watchQuiet = () => new Promise((r) => setTimeout(r, QUIET_MS));
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function setup(): Promise<{ proxy: FaultProxy; echo: Awaited<ReturnType<typeof echoServer>> }> {
  const echo = await echoServer();
  const proxy = await startFaultProxy(echo.port);
  cleanups.push(() => proxy.close(), () => echo.close());
  return { proxy, echo };
}

describe('startFaultProxy', () => {
  it('passes traffic through', async () => {
    const { proxy } = await setup();
    const c = await client(proxy.port);
    c.socket.write('hello');
    await waitFor(() => c.received().length >= 5);
    expect(c.received()).toBe('hello');
    c.socket.destroy();
  });

  it('stall holds every byte, then delivers them in order when healed', async () => {
    const { proxy } = await setup();
    const c = await client(proxy.port);
    proxy.setMode({ kind: 'stall' });
    c.socket.write('late ');
    c.socket.write('write');
    await watchQuiet();
    expect(c.received()).toBe('');
    proxy.setMode({ kind: 'pass' });
    await waitFor(() => c.received().length >= 10);
    expect(c.received()).toBe('late write');
    c.socket.destroy();
  });

  it('drop keeps the connection up but answers nothing (half-open)', async () => {
    const { proxy } = await setup();
    const c = await client(proxy.port);
    proxy.setMode({ kind: 'drop' });
    c.socket.write('lost');
    await watchQuiet();
    expect(c.received()).toBe('');
    expect(c.closed()).toBe(false);
    c.socket.destroy();
  });

  it('cut resets live connections and refuses new ones', async () => {
    const { proxy } = await setup();
    const c = await client(proxy.port);
    proxy.setMode({ kind: 'cut' });
    await waitFor(() => c.closed());
    const late = await client(proxy.port).catch(() => undefined);
    if (late !== undefined) await waitFor(() => late.closed());
  });

  it('refuses the connections a check picks, decided asynchronously: traffic already let through keeps flowing meanwhile', async () => {
    const { proxy } = await setup();
    const kept = await client(proxy.port);
    const keptPort = kept.socket.localPort!;
    // A check that takes its time (a /proc read, on a loaded machine): it answers only when the test
    // lets it, and picks everyone but `kept`.
    let checking = 0;
    let answer!: () => void;
    const answered = new Promise<void>((r) => (answer = r));
    proxy.refuseFrom(async (port) => {
      checking++;
      await answered;
      return port !== keptPort;
    });
    const refused = await client(proxy.port).catch(() => undefined);
    await waitFor(() => checking > 0);
    kept.socket.write('x');
    await waitFor(() => kept.received() === 'x');
    answer();
    if (refused !== undefined) await waitFor(() => refused.closed());
    expect(kept.closed()).toBe(false);
    proxy.refuseFrom(null);
    const admitted = await client(proxy.port);
    admitted.socket.write('y');
    await waitFor(() => admitted.received() === 'y');
    for (const c of [kept, admitted]) c.socket.destroy();
  });

  it('delay adds latency and keeps order', async () => {
    const { proxy } = await setup();
    const c = await client(proxy.port);
    proxy.setMode({ kind: 'delay', delayMs: 150 });
    const sent = performance.now();
    c.socket.write('a');
    c.socket.write('b');
    await waitFor(() => c.received().length >= 2, 10_000, 1);
    expect(c.received()).toBe('ab');
    expect(performance.now() - sent).toBeGreaterThanOrEqual(280); // out and back
    c.socket.destroy();
  });

  it('retarget points new connections at another upstream', async () => {
    const { proxy } = await setup();
    const other = await echoServer();
    cleanups.push(() => other.close());
    proxy.retarget(other.port);
    const c = await client(proxy.port);
    c.socket.write('x');
    await waitFor(() => c.received().length >= 1);
    expect(c.received()).toBe('x');
    c.socket.destroy();
  });

  it('delays only requests when asked: the reply comes straight back, the server sees the request late', async () => {
    const { proxy } = await setup();
    const c = await client(proxy.port);
    proxy.setMode({ kind: 'delay', delayMs: 150, only: 'requests' });
    const sent = performance.now();
    c.socket.write('ping');
    await waitFor(() => c.received().length >= 4, 10_000, 1);
    expect(c.received()).toBe('ping');
    expect(performance.now() - sent).toBeGreaterThanOrEqual(150); // one way only
    c.socket.destroy();
  });

  it('delivers a chunk sent after the delay ends behind the delayed ones, never lost or reordered', async () => {
    const { proxy } = await setup();
    const c = await client(proxy.port);
    proxy.setMode({ kind: 'delay', delayMs: 100 });
    c.socket.write('a');
    await waitFor(() => proxy.heldBytes() === 1, 10_000, 1); // 'a' is inside the proxy, delayed
    proxy.setMode({ kind: 'pass' });
    c.socket.write('b');
    await waitFor(() => c.received().length >= 2, 10_000, 1);
    expect(c.received()).toBe('ab');
    c.socket.destroy();
  });
});
