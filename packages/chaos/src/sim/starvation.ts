import { faultSpans, type HistoryEvent } from '../history.js';

/**
 * A busy machine is the normal case: a replica whose event loop waits seconds for a core dispatches
 * late through no fault of the code. The simulation measures that starvation instead of guessing it:
 * each replica runs a probe (a timer that notes how late it fires) and reports every stretch it ran
 * late, and the supervisor probes itself the same way. The checker credits a replica's starvation to
 * its lateness, as it credits the time its job was busy, and a run whose processes were starved too
 * long to judge timing says so ("inconclusive"), never "failed". Safety checks are never softened.
 */

/** How often the probe's timer is meant to fire, ms. */
export const PROBE_EVERY_MS = 20;
/** The least lateness a probe reports, ms: less is scheduling noise. */
export const REPORT_STARVED_FROM_MS = 50;
/**
 * A run whose replicas (or supervisor) were starved this long, outside the faults aimed at them,
 * cannot have its timing judged: a lateness or liveness check that still fails after the credit is
 * inconclusive, not a failure.
 */
export const INCONCLUSIVE_STARVATION_MS = 500;

/**
 * Starts the probe in a replica: every stretch in which this process's event loop ran at least
 * {@link REPORT_STARVED_FROM_MS} late is reported as `{ kind: 'starved', ms }` (one JSON line, as the
 * simulation reads a replica's reports). The timer does not keep the process alive. Returns its stop.
 *
 * @example
 * ```ts
 * startStarvationProbe((record) => process.stdout.write(`${JSON.stringify(record)}\n`));
 * ```
 */
export function startStarvationProbe(report: (record: { kind: 'starved'; ms: number }) => void): () => void {
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const late = now - last - PROBE_EVERY_MS;
    last = now;
    if (late >= REPORT_STARVED_FROM_MS) report({ kind: 'starved', ms: Math.round(late) });
  }, PROBE_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}

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
