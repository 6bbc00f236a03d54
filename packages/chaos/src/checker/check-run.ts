import type { HistoryEvent } from '../history.js';
import type { CheckInput, EffectMark, InvariantResult } from './check-types.js';
import { ANOMALY_COLUMNS, INVARIANTS, type AnomalyColumn } from './invariants.js';
import { PROTECTIONS, type Protection } from './protections.js';
import { INCONCLUSIVE_STARVATION_MS, mostStarved, starvedIntervals, SUPERVISOR } from './starvation.js';

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
  /**
   * Timing checks that could not be judged, and why: their breaks are not anomalies, and the run
   * proves nothing about them. Null when every check was judged. See {@link inconclusiveChecks}.
   */
  readonly inconclusive: { readonly reason: string; readonly count: number; readonly violations: readonly string[] } | null;
  /** The most any one process (a replica, or the supervisor) was starved of CPU outside the faults aimed at it, ms. */
  readonly starvedMs: number;
}

/** Checks of timing: a starved machine can break them through no fault of the code. */
const TIMING_CHECKS: ReadonlySet<keyof typeof INVARIANTS> = new Set(['dueDispatched', 'silence', 'failover', 'started']);
/** Checks of the run's tail: a fire may still be on its way when a run that never settled ends. */
const TAIL_CHECKS: ReadonlySet<keyof typeof INVARIANTS> = new Set(['missed', 'failedApplyLater']);

/**
 * Which checks a run cannot judge: when some process was starved of CPU for
 * {@link INCONCLUSIVE_STARVATION_MS} or more (outside the faults aimed at it), its timing checks
 * (lateness after the starvation credit, silences, failover bounds), and, if the run also never
 * settled, the checks of its tail (fires that never took effect, failed writes never applied). Safety
 * checks (stale or duplicate effects, early effects, the lease's order, the handler's and the guard's
 * promises, crashed replicas) are always judged. Without such starvation every check is judged: a
 * run that did not settle on a machine that let it run has lost its fires.
 */
export function inconclusiveChecks(starvedMs: number, settled: boolean): ReadonlySet<keyof typeof INVARIANTS> {
  if (starvedMs < INCONCLUSIVE_STARVATION_MS) return new Set();
  return settled ? TIMING_CHECKS : new Set([...TIMING_CHECKS, ...TAIL_CHECKS]);
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
  const lastEventAt = input.history.reduce((last, e) => Math.max(last, e.at), input.window.end);
  const starved = mostStarved(starvedIntervals(input.history), input.window.start, lastEventAt);
  const unjudged = inconclusiveChecks(starved?.ms ?? 0, input.settled ?? true);
  const judged = entries.filter(([name]) => !unjudged.has(name));
  const notJudged = entries.filter(([name]) => unjudged.has(name) && results[name].count > 0);
  const columns = Object.fromEntries(ANOMALY_COLUMNS.map(({ column }) => [column, 0])) as Record<AnomalyColumn, number>;
  for (const [name, entry] of judged) for (const column of entry.columns) columns[column] += results[name].count;
  const protections = Object.fromEntries(Object.entries(PROTECTIONS).map(([name, p]) => [name, p.count(input, byCommit)])) as Record<Protection, number>;

  const violations = judged.flatMap(([name]) => results[name].violations).slice(0, MAX_VIOLATIONS);
  const marks = judged.flatMap(([name]) => results[name].marks);
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
    anomalies: judged.reduce((sum, [name]) => sum + results[name].count, 0),
    violations,
    marks,
    inconclusive:
      notJudged.length === 0
        ? null
        : {
            reason: `${starved!.node === SUPERVISOR ? 'the supervisor' : `replica ${starved!.node}`} starved of CPU for ${(starved!.ms / 1000).toFixed(1)} s${input.settled === false ? ', and the run did not settle' : ''}`,
            count: notJudged.reduce((sum, [name]) => sum + results[name].count, 0),
            violations: notJudged.flatMap(([name]) => results[name].violations).slice(0, MAX_VIOLATIONS),
          },
    starvedMs: Math.round(starved?.ms ?? 0),
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
