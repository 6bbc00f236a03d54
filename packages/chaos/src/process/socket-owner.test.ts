import { spawn } from 'node:child_process';
import net from 'node:net';
import { waitFor } from '#test-support';
import { afterEach, describe, expect, it } from 'vitest';
import { expectListening, ownerOfConnection } from './socket-owner.js';

// Real sockets of real processes: a child connects to a server of this process, and its connection
// is told apart from this process's own connection to the same server.

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

describe('ownerOfConnection', () => {
  it('names the process that holds a connection, by both of its ports', async () => {
    const server = net.createServer((s) => s.on('error', () => {}));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanups.push(() => server.close());
    const serverPort = (server.address() as net.AddressInfo).port;
    const child = spawn(process.execPath, ['-e', `const s = require('node:net').connect(${serverPort}, '127.0.0.1', () => console.log(s.localPort)); setInterval(() => {}, 1000);`], { stdio: ['ignore', 'pipe', 'inherit'] });
    cleanups.push(() => child.kill('SIGKILL'));
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await waitFor(() => out.includes('\n'), 10_000);
    const childPort = Number(out.trim());
    const own = await new Promise<net.Socket>((r) => {
      const s = net.connect(serverPort, '127.0.0.1', () => r(s));
    });
    cleanups.push(() => own.destroy());
    const pids = [child.pid!, process.pid];
    expect(await ownerOfConnection(childPort, serverPort, pids)).toBe(child.pid);
    expect(await ownerOfConnection(own.localPort!, serverPort, pids)).toBe(process.pid);
    expect(await ownerOfConnection(own.localPort!, serverPort, [child.pid!])).toBeUndefined();
    // The same local port to another destination is another connection: nobody holds that one.
    expect(await ownerOfConnection(childPort, serverPort + 1 === 65536 ? 1 : serverPort + 1, pids)).toBeUndefined();
  });
});

describe('expectListening', () => {
  it('passes for the process that listens on the port, and names it to any other that claims the port', async () => {
    const child = spawn(process.execPath, ['-e', `const s = require('node:net').createServer().listen(0, '127.0.0.1', () => console.log(s.address().port));`], { stdio: ['ignore', 'pipe', 'inherit'] });
    cleanups.push(() => child.kill('SIGKILL'));
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await waitFor(() => out.includes('\n'), 10_000);
    const port = Number(out.trim());
    await expect(expectListening(child.pid!, port, 'server')).resolves.toBeUndefined();
    await expect(expectListening(process.pid, port, 'server')).rejects.toThrow(`port ${port} is answered by another process (pid ${child.pid}), not the server started (pid ${process.pid})`);
    // A connection to the port is not a listener: this process, connected, still does not listen there.
    const own = await new Promise<net.Socket>((r) => {
      const s = net.connect(port, '127.0.0.1', () => r(s));
    });
    cleanups.push(() => own.destroy());
    await expect(expectListening(process.pid, port, 'server')).rejects.toThrow(/is answered by another process/);
    child.kill('SIGKILL');
    await waitFor(() => child.exitCode !== null || child.signalCode !== null, 10_000);
    await expect(expectListening(process.pid, port, 'server')).rejects.toThrow(`nothing listens on port ${port}: not the server started (pid ${process.pid}), nor another process`);
  });
});
