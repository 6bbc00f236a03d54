import { describe, expect, it } from 'vitest';
import { startRedisServer } from './redis-server.js';

/** Resolves once `check` holds (a server logs its readiness just after it starts listening). */
async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('a private redis-server', () => {
  it('keeps its log across a restart, gives its tail from a whole line, and has none once stopped', async () => {
    const server = await startRedisServer();
    const ready = () => server.log().match(/Ready to accept connections/g)?.length ?? 0;
    try {
      await until(() => ready() === 1, 10_000);
      await server.kill();
      await server.start();
      await until(() => ready() === 2, 10_000);
      const tail = server.log(200);
      expect(Buffer.byteLength(tail)).toBeLessThanOrEqual(200);
      expect(server.log().endsWith(tail)).toBe(true);
      expect(tail).toMatch(/^\d+:[A-Z] /); // a line's start: "<pid>:<role> <date> ..."
    } finally {
      await server.stop();
    }
    expect(server.log()).toBe('');
  });
});
