import { describe, expect, it } from 'vitest';
import { startStarvationProbe } from './starvation-probe.js';

describe('startStarvationProbe', () => {
  it('reports a stretch in which the event loop was held, with how long it was held', async () => {
    const reports: number[] = [];
    const stop = startStarvationProbe(({ ms }) => reports.push(ms));
    try {
      const until = performance.now() + 300;
      while (performance.now() < until) {
        // the event loop held, as a starved process's is
      }
      // The probe's next tick reports it (a poll with a deadline, not a fixed wait).
      const deadline = performance.now() + 5000;
      while (!reports.some((ms) => ms >= 250) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      expect(Math.max(0, ...reports)).toBeGreaterThanOrEqual(250);
    } finally {
      stop();
    }
  });
});
