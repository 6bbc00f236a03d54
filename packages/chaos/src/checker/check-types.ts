import type { Effect, HistoryEvent } from '../history.js';

// The checker's vocabulary, apart from the checks: every invariant module and the run's check import
// these, and none of them imports another for its types.

export interface CheckInput {
  readonly history: readonly HistoryEvent[];
  /** Committed effects, in any order (they are sorted by commit order here). */
  readonly effects: readonly Effect[];
  /** Fire ids that must have taken effect: every fire due inside the checked window. */
  readonly expectedFireIds: readonly string[];
  /** The checked window, epoch ms: overlaps and gaps are measured inside it. */
  readonly window: { readonly start: number; readonly end: number };
  /** An effect committed more than this before its due time counts as early (see `noEarlyEffect`). @defaultValue 1 */
  readonly earlyToleranceMs?: number;
  /**
   * How soon after a fault ends the replicas must dispatch again, and dispatch every fire that came
   * due meanwhile (see layer-invariants.ts). Without it, neither is asserted.
   */
  readonly recoveryMs?: number;
  /**
   * How soon another replica must lead after the leader is paused where the scenario aims (inside
   * its guarded transaction): TTL + renew interval + 1 s. Not judged without it.
   */
  readonly failoverBound?: { readonly ms: number; readonly fault: string };
  /**
   * Whether the run settled after its faults healed (one leader, caught up, no write open; see
   * quiescence.ts) before it ended. A run that did not, on a starved machine, leaves its tail unjudged.
   * @defaultValue true
   */
  readonly settled?: boolean;
  /** Why the run's replicas never got going (no leader, or no dispatch, in time): one break of liveness. */
  readonly startFailure?: string;
  /** Per resource, the fence PostgreSQL committed and the guard's Redis mark, read after the run. */
  readonly fences?: readonly FenceState[];
}

/** One resource's fence and Redis mark (decimal strings; null where there is none). */
export interface FenceState {
  readonly resource: string;
  readonly fence: string | null;
  readonly mark: string | null;
}

/** An effect a checker found wrong, by its place in commit order: what the report draws in red. */
export interface EffectMark {
  readonly commitSeq: number;
  readonly kind: 'stale' | 'duplicate' | 'early';
}

/** What one invariant found over one run. */
export interface InvariantResult {
  /** How many times the invariant was broken (0 is the promise). */
  readonly count: number;
  /** A line per break, the first few. */
  readonly violations: readonly string[];
  /** The effects to mark on the timeline. */
  readonly marks: readonly EffectMark[];
}

/** One invariant of the promise, checked over one run's history and committed effects. */
export type Invariant = (input: CheckInput, byCommit: readonly Effect[]) => InvariantResult;

