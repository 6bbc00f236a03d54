import { describe, expect, it } from 'vitest';
import { startStarvationProbe } from './starvation-probe.js';

describe('startStarvationProbe', () => {
  it('reports a stretch in which the event loop was blocked, and nothing while it runs freely', async () => {
    const reports: number[] = [];
    const stop = startStarvationProbe(({ ms }) => reports.push(ms));
    try {
      await new Promise((r) => setTimeout(r, 100));
      const quiet = reports.length;
      const until = performance.now() + 300;
      while (performance.now() < until) {
        // the event loop held, as a starved process's is
      }
      const deadline = performance.now() + 5000;
      while (reports.length === quiet && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(reports.at(-1)).toBeGreaterThanOrEqual(250);
    } finally {
      stop();
    }
  });
});
