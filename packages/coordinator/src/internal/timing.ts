/** `base` scaled by a random factor in [1 - spread, 1 + spread], so replicas do not retry in lockstep. */
export function jitter(base: number, spread = 0.2): number {
  return Math.max(0, Math.round(base * (1 - spread + Math.random() * 2 * spread)));
}

/** Exponential backoff with full jitter, capped. */
export function backoffMs(attempt: number, baseMs: number, capMs: number): number {
  return Math.round(Math.random() * Math.min(capMs, baseMs * 2 ** Math.min(attempt, 20)));
}
