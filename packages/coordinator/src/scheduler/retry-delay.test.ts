import { describe, expect, it } from 'vitest';
import { retryDelayMs } from './retry-delay.js';

describe('retryDelayMs', () => {
  const policy = { minDelayMs: 100, maxDelayMs: 2000 };

  it('doubles from the least delay up to the most, each drawn between half of it and all of it', () => {
    expect([1, 2, 3, 4, 5, 6, 50].map((n) => retryDelayMs(n, policy, () => 1))).toEqual([100, 200, 400, 800, 1600, 2000, 2000]);
    expect([1, 2, 3, 4, 5, 6, 50].map((n) => retryDelayMs(n, policy, () => 0))).toEqual([50, 100, 200, 400, 800, 1000, 1000]);
  });

  it('never waits less than a millisecond, whatever the policy', () => {
    expect(retryDelayMs(1, { minDelayMs: 1, maxDelayMs: 1 }, () => 0)).toBe(1);
    expect(retryDelayMs(0, policy, () => 1)).toBe(100);
  });
});
