import type { Effect } from '../history.js';
import type { Invariant } from './check-types.js';

// The promise over the committed effects themselves: what the user's data shows, whatever any layer
// believed.

const FIRST = 5;

/** Per resource, in commit order, no effect carries a token lower than one committed before it. */
export const noStaleEffect: Invariant = (_input, byCommit) => {
  const highest = new Map<string, Effect>();
  const stale: Effect[] = [];
  const violations: string[] = [];
  for (const effect of byCommit) {
    const top = highest.get(effect.resource);
    if (top !== undefined && effect.token < top.token) {
      stale.push(effect);
      violations.push(
        `stale write applied: ${effect.fireId} with token ${effect.token} by ${effect.node} committed after token ${top.token} (${top.fireId} by ${top.node}) on ${effect.resource}`,
      );
    }
    if (top === undefined || effect.token > top.token) highest.set(effect.resource, effect);
  }
  return { count: stale.length, violations, marks: stale.map((e) => ({ commitSeq: e.commitSeq, kind: 'stale' })) };
};

/** Each fire takes effect at most once per resource. */
export const noDuplicateEffect: Invariant = (_input, byCommit) => {
  const seen = new Set<string>();
  const again: Effect[] = [];
  for (const effect of byCommit) {
    const key = `${effect.resource}\u0000${effect.fireId}`;
    if (seen.has(key)) again.push(effect);
    seen.add(key);
  }
  return {
    count: again.length,
    violations: again.map((e) => `fire took effect twice: ${e.fireId} on ${e.resource} (again by ${e.node}, token ${e.token})`),
    marks: again.map((e) => ({ commitSeq: e.commitSeq, kind: 'duplicate' })),
  };
};

/** Every fire due in the checked window takes effect. */
export const noMissedFire: Invariant = (input, byCommit) => {
  const applied = new Set(byCommit.map((e) => e.fireId));
  const missing = input.expectedFireIds.filter((id) => !applied.has(id));
  return { count: missing.length, violations: missing.slice(0, FIRST).map((id) => `fire never took effect: ${id}`), marks: [] };
};

/**
 * Nothing takes effect before it is due. Due times come from the Redis server's clock in whole
 * milliseconds, commit times from PostgreSQL's in microseconds; in the simulation both servers run
 * on one host and read one clock, so the only slack owed is the millisecond rounding.
 */
export const noEarlyEffect: Invariant = (input, byCommit) => {
  const tolerance = input.earlyToleranceMs ?? 1;
  const early = byCommit.filter((e) => e.committedAt < e.scheduledAt - tolerance);
  return {
    count: early.length,
    violations: early.slice(0, FIRST).map((e) => `fire took effect ${Math.round(e.scheduledAt - e.committedAt)} ms early: ${e.fireId} by ${e.node}`),
    marks: early.map((e) => ({ commitSeq: e.commitSeq, kind: 'early' })),
  };
};
