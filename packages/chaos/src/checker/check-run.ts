import type { Effect, HistoryEvent } from '../history/history.js';

export interface CheckInput {
  readonly history: readonly HistoryEvent[];
  /** Committed effects, in any order (they are sorted by commit order here). */
  readonly effects: readonly Effect[];
  /** Fire ids that must have taken effect: every fire due inside the checked window. */
  readonly expectedFireIds: readonly string[];
  /** The checked window, epoch ms: overlaps and gaps are measured inside it. */
  readonly window: { readonly start: number; readonly end: number };
  /**
   * An effect committed more than this before its due time counts as early. Due times come from the
   * Redis server's clock in whole milliseconds, commit times from PostgreSQL's in microseconds; in
   * the simulation both servers run on one host and read one clock, so the only slack owed is the
   * millisecond rounding. @defaultValue 1
   */
  readonly earlyToleranceMs?: number;
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
  /** Write attempts the guard refused as stale. */
  readonly staleRefused: number;
  /** Write attempts refused as duplicates of an applied fire. */
  readonly duplicatesRefused: number;
  /** Windows in which two or more replicas believed they led. */
  readonly overlaps: readonly OverlapWindow[];
  /** The longest time inside the window with no dispatch by anyone, ms. */
  readonly maxFailoverGapMs: number;
  /** duplicates + missed + staleApplied + early. Zero is the promise. */
  readonly anomalies: number;
  /** Human-readable descriptions of the first violations found. */
  readonly violations: readonly string[];
}

const MAX_VIOLATIONS = 20;

/**
 * Checks the promise over one run: committed effects never go down in token per resource, each fire
 * takes effect at most once and none in the window is lost, nothing takes effect early. It also
 * measures leadership overlaps (expected under pauses; each must be harmless) and the failover gap.
 */
export function checkRun(input: CheckInput): CheckResult {
  const violations: string[] = [];
  const violation = (text: string) => {
    if (violations.length < MAX_VIOLATIONS) violations.push(text);
  };
  const tolerance = input.earlyToleranceMs ?? 1;
  const byCommit = [...input.effects].sort((a, b) => a.commitSeq - b.commitSeq);

  // Stale writes that took effect: in commit order, per resource, the token must never go down.
  const highest = new Map<string, Effect>();
  const staleEffects = new Set<Effect>();
  for (const effect of byCommit) {
    const top = highest.get(effect.resource);
    if (top !== undefined && effect.token < top.token) {
      staleEffects.add(effect);
      violation(
        `stale write applied: ${effect.fireId} with token ${effect.token} by ${effect.node} committed after token ${top.token} (${top.fireId} by ${top.node}) on ${effect.resource}`,
      );
    }
    if (top === undefined || effect.token > top.token) highest.set(effect.resource, effect);
  }

  // At most once per fire id (per resource), and none missing.
  const seen = new Map<string, number>();
  for (const effect of byCommit) {
    const key = `${effect.resource}\u0000${effect.fireId}`;
    const count = (seen.get(key) ?? 0) + 1;
    seen.set(key, count);
    if (count === 2) violation(`fire took effect twice: ${effect.fireId} on ${effect.resource} (again by ${effect.node}, token ${effect.token})`);
  }
  const duplicates = [...seen.values()].reduce((sum, n) => sum + n - 1, 0);
  const applied = new Set(byCommit.map((e) => e.fireId));
  const missing = input.expectedFireIds.filter((id) => !applied.has(id));
  for (const id of missing.slice(0, 5)) violation(`fire never took effect: ${id}`);

  const earlyEffects = byCommit.filter((e) => e.committedAt < e.scheduledAt - tolerance);
  for (const e of earlyEffects.slice(0, 5)) violation(`fire took effect ${Math.round(e.scheduledAt - e.committedAt)} ms early: ${e.fireId} by ${e.node}`);

  const writes = input.history.filter((e): e is Extract<HistoryEvent, { kind: 'write' }> => e.kind === 'write');
  const overlaps = leadershipOverlaps(input.history, input.window).map((w) => ({
    ...w,
    harmless: ![...staleEffects].some((e) => w.nodes.includes(e.node) && e.committedAt >= w.start - 1000),
  }));

  const result = {
    fires: input.expectedFireIds.length,
    effects: byCommit.length,
    duplicates,
    missed: missing.length,
    staleApplied: staleEffects.size,
    early: earlyEffects.length,
    staleRefused: writes.filter((w) => w.outcome === 'stale').length,
    duplicatesRefused: writes.filter((w) => w.outcome === 'duplicate').length,
    overlaps,
    maxFailoverGapMs: maxDispatchGap(input.history, input.window),
    violations,
  };
  return { ...result, anomalies: result.duplicates + result.missed + result.staleApplied + result.early };
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
