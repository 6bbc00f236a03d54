/** Monotonic milliseconds. Never the wall clock: lease deadlines must not move when it jumps. */
export interface Clock {
  now(): number;
}

export const monotonicClock: Clock = { now: () => performance.now() };
