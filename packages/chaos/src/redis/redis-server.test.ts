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
});
