import type { Effect, HistoryEvent } from '../history.js';
import { INVARIANTS, type EffectMark, type InvariantResult } from './invariants.js';
import { firstFailedWrites } from './layer-invariants.js';

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
  /** Per resource, the fence PostgreSQL committed and the guard's Redis mark, read after the run. */
  readonly fences?: readonly FenceState[];
}

/** One resource's fence and Redis mark (decimal strings; null where there is none). */
export interface FenceState {
  readonly resource: string;
  readonly fence: string | null;
  readonly mark: string | null;
}

export interface OverlapWindow {
  readonly start: number;
  readonly end: number;
  readonly nodes: readonly string[];
  /** No effect committed by a node in the window was stale: the guard refused the stale side. */
  readonly harmless: boolean;
}

export interface CheckResult {
  /** Fires due in the window. */
  readonly fires: number;
  /** Committed effects. */
  readonly effects: number;
  /** Effects beyond the first for one fire id (a fire that took effect twice). */
  readonly duplicates: number;
  /** Fires due in the window that never took effect. */
  readonly missed: number;
  /** Effects committed with a token lower than one committed before them on the same resource. */
  readonly staleApplied: number;
  /** Effects committed before their fire was due. */
  readonly early: number;
  /**
   * Breaks of the lease's own promise, whatever the effects: an election whose token is not above
   * every token elected before it, a dispatch by a replica that did not lead (see lease-invariants.ts).
   */
  readonly lease: number;
  /**
   * Breaks of the scheduler's promise: a dispatch after its own lease ended, a dispatch before the
   * fire was due, a due fire not dispatched within the bound (`recoveryMs`).
   */
  readonly scheduler: number;
  /** Handlers started for a token below what the guard already knew, or while it could not be reached at all (the pre-check's promise). */
  readonly handler: number;
  /** Stale effects applied, and Redis marks ahead of the committed fence (the guard's promise). */
  readonly guard: number;
  /** Fires that took effect twice, and failed writes never applied by a later delivery (dedupe's promise). */
  readonly dedupe: number;
  /**
   * Stretches outside the faults longer than `recoveryMs` with no dispatch by anyone, failovers slower
   * than `failoverBound`, and replica processes that died on their own (an unhandled error), whatever
   * the fault.
   */
  readonly liveness: number;
  /** Write attempts the guard refused as stale. */
  readonly staleRefused: number;
  /** Write attempts refused as duplicates of an applied fire. */
  readonly duplicatesRefused: number;
  /** Fires whose write failed (the guard unreachable: nothing applied) and that took effect on a later delivery. */
  readonly writesRetried: number;
  /** Elections that found their token at or below a fence and raised the counter past it. */
  readonly tokensRepaired: number;
  /** Failpoint hits (a replica stopped or stalled there): the faults that landed exactly where they were aimed. */
  readonly failpointHits: number;
  /** Deposed leaders' transactions ended by an election-time advance they blocked. */
  readonly takeovers: number;
  /** Windows in which two or more replicas believed they led. */
  readonly overlaps: readonly OverlapWindow[];
  /** The longest time inside the window with no dispatch by anyone, ms. */
  readonly maxFailoverGapMs: number;
  /** The effects' anomalies (duplicates + missed + staleApplied + early) plus every layer's breaks. Zero is the promise. */
  readonly anomalies: number;
  /** Human-readable descriptions of the first violations found. */
  readonly violations: readonly string[];
  /** The effects the invariants found wrong, for the report to draw. */
  readonly marks: readonly EffectMark[];
}

const MAX_VIOLATIONS = 20;

/**
 * Checks the promise over one run, one invariant at a time (see `INVARIANTS`): committed effects
 * never go down in token per resource, each fire takes effect at most once and none in the window is
 * lost, nothing takes effect early. It also measures leadership overlaps (expected under pauses; each
 * must be harmless) and the failover gap. The marks it returns are what the report draws.
 */
export function checkRun(input: CheckInput): CheckResult {
  const byCommit = [...input.effects].sort((a, b) => a.commitSeq - b.commitSeq);
  const results = Object.fromEntries(Object.entries(INVARIANTS).map(([name, invariant]) => [name, invariant(input, byCommit)])) as Record<
    keyof typeof INVARIANTS,
    InvariantResult
  >;
  const violations = Object.values(results)
    .flatMap((r) => r.violations)
    .slice(0, MAX_VIOLATIONS);
  const marks = Object.values(results).flatMap((r) => r.marks);
  const staleSeqs = new Set(results.staleApplied.marks.map((m) => m.commitSeq));
  const staleEffects = byCommit.filter((e) => staleSeqs.has(e.commitSeq));

  const writes = input.history.filter((e): e is Extract<HistoryEvent, { kind: 'write' }> => e.kind === 'write');
  const appliedIds = new Set(byCommit.map((e) => e.fireId));
  const overlaps = leadershipOverlaps(input.history, input.window).map((w) => ({
    ...w,
    harmless: !staleEffects.some((e) => w.nodes.includes(e.node) && e.committedAt >= w.start - 1000),
  }));

  const result = {
    fires: input.expectedFireIds.length,
    effects: byCommit.length,
    duplicates: results.duplicates.count,
    missed: results.missed.count,
    staleApplied: results.staleApplied.count,
    early: results.early.count,
    lease: results.electionOrder.count + results.dispatchWhileLeading.count,
    scheduler: results.dispatchWithinOwnTerm.count + results.earlyDispatch.count + results.dueDispatched.count,
    handler: results.handlerForStale.count + results.handlerUnguarded.count,
    guard: results.staleApplied.count + results.markAhead.count,
    dedupe: results.duplicates.count + results.failedApplyLater.count,
    liveness: results.silence.count + results.crashes.count + results.failover.count,
    staleRefused: writes.filter((w) => w.outcome === 'stale').length,
    duplicatesRefused: writes.filter((w) => w.outcome === 'duplicate').length,
    tokensRepaired: input.history.filter((e) => e.kind === 'repair').length,
    writesRetried: [...firstFailedWrites(input.history).keys()].filter((id) => appliedIds.has(id)).length,
    failpointHits: input.history.filter((e) => e.kind === 'failpoint').length,
    takeovers: input.history.filter((e) => e.kind === 'takeover' && e.ended).length,
    overlaps,
    maxFailoverGapMs: maxDispatchGap(input.history, input.window),
    violations,
    marks,
  };
  // Each break counted once: the guard and dedupe columns include the effects' stale and duplicate counts.
  const layerOnly = result.scheduler + result.handler + results.markAhead.count + results.failedApplyLater.count + result.liveness;
  return { ...result, anomalies: result.duplicates + result.missed + result.staleApplied + result.early + result.lease + layerOnly };
}

/** Intervals in which two or more nodes believed they led, clipped to the window. */
export function leadershipOverlaps(history: readonly HistoryEvent[], window: { start: number; end: number }): Array<Omit<OverlapWindow, 'harmless'>> {
  const intervals = leadershipIntervals(history, window.end);
  const points = intervals.flatMap((i) => [
    { at: i.start, node: i.node, delta: 1 },
    { at: i.end, node: i.node, delta: -1 },
  ]);
  points.sort((a, b) => a.at - b.at || a.delta - b.delta);
  const leading = new Map<string, number>();
  const overlaps: Array<Omit<OverlapWindow, 'harmless'>> = [];
  let open: { start: number; nodes: Set<string> } | undefined;
  for (const p of points) {
    leading.set(p.node, (leading.get(p.node) ?? 0) + p.delta);
    const now = [...leading].filter(([, n]) => n > 0).map(([node]) => node);
    if (now.length >= 2) {
      if (open === undefined) open = { start: p.at, nodes: new Set(now) };
      else for (const n of now) open.nodes.add(n);
    } else if (open !== undefined) {
      const start = Math.max(open.start, window.start);
      const end = Math.min(p.at, window.end);
      if (end > start) overlaps.push({ start, end, nodes: [...open.nodes].sort() });
      open = undefined;
    }
  }
  return overlaps;
}

/** Each node's leadership epochs: from a belief `leader: true` to the next `false`, exit, or `end`. */
export function leadershipIntervals(history: readonly HistoryEvent[], end: number): Array<{ node: string; start: number; end: number; token?: string }> {
  const open = new Map<string, { start: number; token?: string }>();
  const out: Array<{ node: string; start: number; end: number; token?: string }> = [];
  const close = (node: string, at: number) => {
    const o = open.get(node);
    if (o === undefined) return;
    out.push({ node, start: o.start, end: at, ...(o.token === undefined ? {} : { token: o.token }) });
    open.delete(node);
  };
  for (const e of history) {
    if (e.kind === 'belief') {
      if (e.leader) {
        close(e.node, e.at);
        open.set(e.node, { start: e.at, ...(e.token === undefined ? {} : { token: e.token }) });
      } else close(e.node, e.at);
    } else if (e.kind === 'process' && e.event === 'exited') {
      close(e.node, e.at);
    }
  }
  for (const node of [...open.keys()]) close(node, end);
  return out.sort((a, b) => a.start - b.start);
}

/** The longest stretch inside the window without a dispatch, ms. */
export function maxDispatchGap(history: readonly HistoryEvent[], window: { start: number; end: number }): number {
  const times = history
    .filter((e) => e.kind === 'dispatch' && e.at >= window.start && e.at <= window.end)
    .map((e) => e.at)
    .sort((a, b) => a - b);
  let previous = window.start;
  let gap = 0;
  for (const t of [...times, window.end]) {
    gap = Math.max(gap, t - previous);
    previous = t;
  }
  return Math.round(gap);
}
