import type { HistoryEvent } from '../history.js';
import type { CheckInput, EffectMark, InvariantResult } from './check-types.js';
import { ANOMALY_COLUMNS, INVARIANTS, type AnomalyColumn } from './invariants.js';
import { PROTECTIONS, type Protection } from './protections.js';

export type { CheckInput, FenceState } from './check-types.js';

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
  /** Per column of the results table, the breaks the invariants that name it counted (see `ANOMALY_COLUMNS`). */
  readonly columns: Readonly<Record<AnomalyColumn, number>>;
  /** Per protection, how many times the history shows it at work (see `PROTECTIONS`). */
  readonly protections: Readonly<Record<Protection, number>>;
  /** Windows in which two or more replicas believed they led. */
  readonly overlaps: readonly OverlapWindow[];
  /** The longest time inside the window with no dispatch by anyone, ms. */
  readonly maxFailoverGapMs: number;
  /** Every invariant's breaks, each counted once. Zero is the promise. */
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
  const results = Object.fromEntries(Object.entries(INVARIANTS).map(([name, entry]) => [name, entry.check(input, byCommit)])) as Record<keyof typeof INVARIANTS, InvariantResult>;
  const entries = Object.entries(INVARIANTS) as Array<[keyof typeof INVARIANTS, (typeof INVARIANTS)[keyof typeof INVARIANTS]]>;
  const columns = Object.fromEntries(ANOMALY_COLUMNS.map(({ column }) => [column, 0])) as Record<AnomalyColumn, number>;
  for (const [name, entry] of entries) for (const column of entry.columns) columns[column] += results[name].count;
  const protections = Object.fromEntries(Object.entries(PROTECTIONS).map(([name, p]) => [name, p.count(input, byCommit)])) as Record<Protection, number>;

  const violations = Object.values(results)
    .flatMap((r) => r.violations)
    .slice(0, MAX_VIOLATIONS);
  const marks = Object.values(results).flatMap((r) => r.marks);
  const staleSeqs = new Set(results.staleApplied.marks.map((m) => m.commitSeq));
  const staleEffects = byCommit.filter((e) => staleSeqs.has(e.commitSeq));
  const overlaps = leadershipOverlaps(input.history, input.window).map((w) => ({
    ...w,
    harmless: !staleEffects.some((e) => w.nodes.includes(e.node) && e.committedAt >= w.start - 1000),
  }));

  return {
    fires: input.expectedFireIds.length,
    effects: byCommit.length,
    columns,
    protections,
    overlaps,
    maxFailoverGapMs: maxDispatchGap(input.history, input.window),
    // Each break once, though a column of a layer and a column of the effects may both show it.
    anomalies: Object.values(results).reduce((sum, r) => sum + r.count, 0),
    violations,
    marks,
  };
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
