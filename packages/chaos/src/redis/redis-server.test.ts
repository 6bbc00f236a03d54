import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '#test-support';
import { describe, expect, it } from 'vitest';
import { startRedisServer } from './redis-server.js';

describe('a private redis-server', () => {
  it('keeps its log across a restart, gives its tail from a whole line, and has none once stopped', async () => {
    const server = await startRedisServer();
    const ready = () => server.log().match(/Ready to accept connections/g)?.length ?? 0;
    try {
      // A server logs its readiness just after it starts listening.
      await waitFor(() => ready() === 1, 10_000);
      await server.kill();
      await server.start();
      await waitFor(() => ready() === 2, 10_000);
      const tail = server.log(200);
      expect(Buffer.byteLength(tail)).toBeLessThanOrEqual(200);
      expect(server.log().endsWith(tail)).toBe(true);
      expect(tail).toMatch(/^\d+:[A-Z] /); // a line's start: "<pid>:<role> <date> ..."
    } finally {
      await server.stop();
    }
    expect(server.log()).toBe('');
  });

  it('refuses to start where another redis-server answers its port (taken while it was down), and says whose it is', async () => {
    // A redis-server that starts late (it sleeps, then execs, keeping its pid): the other server
    // answers its port first every time, not only when the scheduler lets it win over the exit.
    const dir = mkdtempSync(join(tmpdir(), 'fenced-late-redis-'));
    const binary = join(dir, 'late-redis-server');
    writeFileSync(binary, '#!/bin/sh\nsleep 0.5\nexec redis-server "$@"\n', { mode: 0o755 });
    const server = await startRedisServer({ binary });
    let other: Awaited<ReturnType<typeof startRedisServer>> | undefined;
    try {
      await server.kill();
      // Another server binds the port while this one is down, as another process's pick could.
      other = await startRedisServer({ port: server.port });
      await expect(server.start()).rejects.toThrow(`port ${server.port} is answered by another redis-server (pid ${other.process?.pid}), not the one started`);
      expect(server.process, 'the server that could not bind, killed').toBeUndefined();
      // The other server is untouched.
      await other.stop();
      other = undefined;
      await server.start();
      expect(server.process).toBeDefined();
    } finally {
      await other?.stop();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
