import { faultSpans, type HistoryEvent } from '../history.js';

/**
 * A busy machine is the normal case: a replica whose event loop waits seconds for a core dispatches
 * late through no fault of the code. Each replica's probe (sim/starvation-probe.ts) and the
 * supervisor's own report every stretch they ran late; here those reports become intervals, which
 * the lateness check credits (as it credits the time a job was busy) and which decide whether a
 * run's timing can be judged at all ("inconclusive"). Safety checks are never softened.
 */

/**
 * A run whose replicas (or supervisor) were starved this long, outside the faults aimed at them,
 * cannot have its timing judged: a lateness or liveness check that still fails after the credit is
 * inconclusive, not a failure.
 */
export const INCONCLUSIVE_STARVATION_MS = 500;

export interface Interval {
  readonly start: number;
  readonly end: number;
}

/** The name the supervisor's own starvation is recorded under. */
export const SUPERVISOR = 'supervisor';

/**
 * Per process (each replica, and the supervisor), the stretches it was starved: each report covers
 * the `ms` before it was read. A stretch that overlaps a fault aimed at that replica (a pause, a
 * stall, a failpoint's stop) is the fault's doing, not the machine's, and is left out.
 */
export function starvedIntervals(history: readonly HistoryEvent[]): Map<string, Interval[]> {
  const aimed = new Map<string, Interval[]>();
  for (const span of faultSpans(history)) {
    const target = span.start.target;
    if (target === undefined) continue;
    const list = aimed.get(target) ?? [];
    list.push({ start: span.start.at, end: span.end ?? Number.POSITIVE_INFINITY });
    aimed.set(target, list);
  }
  // A replica stopped at a failpoint (SIGSTOP) is stopped before the fault's start is recorded.
  for (const e of history) {
    if (e.kind !== 'failpoint') continue;
    const list = aimed.get(e.node) ?? [];
    list.push({ start: e.at, end: e.at });
    aimed.set(e.node, list);
  }
  const byNode = new Map<string, Interval[]>();
  for (const e of history) {
    if (e.kind !== 'starved') continue;
    const stretch = { start: e.at - e.ms, end: e.at };
    const faults = aimed.get(e.node) ?? [];
    if (faults.some((f) => f.start <= stretch.end && stretch.start <= f.end)) continue;
    const list = byNode.get(e.node) ?? [];
    list.push(stretch);
    byNode.set(e.node, list);
  }
  return byNode;
}

/** How long, within [from, until), at least one of the intervals was on (their union, clipped). */
export function coveredWithin(intervals: readonly Interval[], from: number, until: number): number {
  const clipped = intervals
    .map((i) => ({ start: Math.max(i.start, from), end: Math.min(i.end, until) }))
    .filter((i) => i.end > i.start)
    .sort((a, b) => a.start - b.start);
  let total = 0;
  let reached = from;
  for (const i of clipped) {
    const start = Math.max(i.start, reached);
    if (i.end > start) total += i.end - start;
    reached = Math.max(reached, i.end);
  }
  return total;
}

/** The most any one process was starved within [from, until), and which. */
export function mostStarved(starved: ReadonlyMap<string, readonly Interval[]>, from: number, until: number): { node: string; ms: number } | null {
  let most: { node: string; ms: number } | null = null;
  for (const [node, intervals] of starved) {
    const ms = coveredWithin(intervals, from, until);
    if (ms > 0 && (most === null || ms > most.ms)) most = { node, ms };
  }
  return most;
}
