/** How a failed fire is dispatched again (see the scheduler's `retry` option). */
export interface RetryPolicy {
  readonly minDelayMs: number;
  readonly maxDelayMs: number;
}

/**
 * The wait before dispatching a fire again after its `attempt`-th dispatch failed: doubling from
 * `minDelayMs` up to `maxDelayMs`, drawn between half of that and all of it, so that the jobs of a
 * database that went away together do not all come back in the same millisecond.
 */
export function retryDelayMs(attempt: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.minDelayMs * 2 ** Math.min(Math.max(attempt, 1) - 1, 30));
  return Math.max(1, Math.round(ceiling / 2 + (random() * ceiling) / 2));
}
