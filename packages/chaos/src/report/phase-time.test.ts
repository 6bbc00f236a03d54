import { describe, expect, it } from 'vitest';
import { phaseTimeLine } from './phase-time.js';

describe('phaseTimeLine', () => {
  it('sums each phase over the runs, in the order a run goes through them, with the total', () => {
    const line = phaseTimeLine([
      { phaseMs: { servers: 1000, start: 1500, faults: 6000, settle: 2000, check: 300, teardown: 700 } },
      // A run that never got past its start: no faults, settle; its check and teardown still count.
      { phaseMs: { servers: 500, start: 30_000, check: 100, teardown: 400 } },
    ]);
    expect(line).toBe('sim: time by phase over 2 runs: servers 1.5 s, start 31.5 s, faults 6.0 s, settle 2.0 s, check 0.4 s, teardown 1.1 s (total 42.5 s)');
  });
});
