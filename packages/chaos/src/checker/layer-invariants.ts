import { faultSpans, type HistoryEvent } from '../history.js';
import type { CheckInput, Invariant, InvariantResult } from './check-types.js';
import { coveredWithin, starvedIntervals, SUPERVISOR } from './starvation.js';

// Each layer's own promise, judged from what the replicas reported rather than from the effects: the
// fence downstream absorbs a scheduler, handler or guard that breaks its promise, so the effects alone
// cannot show such a bug.

const FIRST = 5;

type Dispatch = Extract<HistoryEvent, { kind: 'dispatch' }>;

function result(count: number, violations: string[]): InvariantResult {
  return { count, violations: violations.slice(0, FIRST), marks: [] };
}

/**
 * The scheduler's self-fence: a replica dispatches only while its own lease, by its own clock, is
 * still current with the token it dispatches (`leading`, read by the replica at the dispatch).
 */
export const dispatchWithinOwnTerm: Invariant = (input) => {
  const late = input.history.filter((e): e is Dispatch => e.kind === 'dispatch' && e.leading === false);
  return result(
    late.length,
    late.map((e) => `dispatch after its own lease ended: ${e.node} dispatched ${e.fireId} with token ${e.token} while its lease, by its own clock, was over`),
  );
};

/**
 * Nothing is dispatched before it is due by the server clock. The supervisor stamps a line when it
 * reads it, after the replica wrote it, and runs on the host whose clock the Redis server reads: a
 * line stamped before the fire was due was written before it was due.
 */
export const noEarlyDispatch: Invariant = (input) => {
  const tolerance = input.earlyToleranceMs ?? 1;
  const early = input.history.filter((e): e is Dispatch => e.kind === 'dispatch' && e.scheduledAt !== undefined && e.at < e.scheduledAt - tolerance);
  return result(
    early.length,
    early.map((e) => `dispatched ${Math.round(e.scheduledAt! - e.at)} ms early: ${e.fireId} by ${e.node}`),
  );
};

/**
 * Every fire due in the window is dispatched, catch-up included, within the bound: `recoveryMs` after
 * it was due, or after the end of the fault it came due in, or after the end of a fault that began
 * while it still waited within its bound (a fire in a backlog when the replica draining it is hit
 * waits for the failover as a fire due in the fault does; one already past its bound when the fault
 * began is judged from before it), plus the time the dispatching replica's
 * job was busy with earlier fires meanwhile (from each dispatch to its `handled` line: the scheduler
 * runs one fire of a job at a time, so a backlog drains no faster than its handler), plus the time
 * the machine starved that replica or the supervisor of CPU (their probes' `starved` reports, outside
 * the faults aimed at them; see starvation.ts). Time the job sat idle on a machine that let it run
 * earns nothing: a scheduler that does not dispatch a due fire while it could is still caught. Fires
 * are judged by their first dispatch. Not judged without `recoveryMs`.
 */
export const dueFiresDispatchedInTime: Invariant = (input) => {
  const recoveryMs = input.recoveryMs;
  if (recoveryMs === undefined) return result(0, []);
  const faults = faultIntervals(input.history, input.window.end);
  const busy = busyIntervals(input.history);
  const starved = starvedIntervals(input.history);
  const supervisorStarved = starved.get(SUPERVISOR) ?? [];
  const first = new Map<string, Dispatch>();
  /** Per job, its dispatches in the order they were made. */
  const dispatchesOf = new Map<string, Dispatch[]>();
  for (const e of input.history) {
    if (e.kind !== 'dispatch') continue;
    if (!first.has(e.fireId)) first.set(e.fireId, e);
    const job = jobOf(e.fireId);
    const list = dispatchesOf.get(job) ?? [];
    list.push(e);
    dispatchesOf.set(job, list);
  }
  for (const list of dispatchesOf.values()) list.sort((a, b) => a.at - b.at);
  /** Per replica, what its wait earns: its busy and starved stretches, and the supervisor's. */
  const credits = new Map<string, Array<{ start: number; end: number }>>();
  const creditOf = (node: string) => {
    let credit = credits.get(node);
    if (credit === undefined) credits.set(node, (credit = [...(busy.get(node) ?? []), ...(starved.get(node) ?? []), ...supervisorStarved]));
    return credit;
  };
  const violations: string[] = [];
  let count = 0;
  for (const id of input.expectedFireIds) {
    const dispatch = first.get(id);
    if (dispatch === undefined) {
      count++;
      violations.push(`never dispatched: ${id}`);
      continue;
    }
    if (dispatch.scheduledAt === undefined) continue;
    const credit = creditOf(dispatch.node);
    // Before a fault it waited through, the fire waited on the replica that was dispatching its job
    // then (the one the fault hit, when it hit the leader): that replica's busy time is its credit.
    const job = jobOf(id);
    const holderBefore = (at: number) => lastBefore(dispatchesOf.get(job) ?? [], at)?.node ?? dispatch.node;
    const from = waitingFrom(dispatch.scheduledAt, dispatch.at, faults, (start, until) => start + recoveryMs + coveredWithin(creditOf(holderBefore(until)), start, until));
    const held = coveredWithin(credit, from, dispatch.at);
    const bound = from + recoveryMs + held;
    if (dispatch.at > bound) {
      count++;
      violations.push(`dispatched ${Math.round(dispatch.at - bound)} ms past its bound: ${id} by ${dispatch.node}, ${Math.round(dispatch.at - dispatch.scheduledAt)} ms after it was due${held > 0 ? ` (${Math.round(held)} ms of it busy with earlier fires or starved of CPU)` : ''}`);
    }
  }
  return result(count, violations);
};

/**
 * A fire id's job: the scheduler's ids are `<job>@<time>`; any other id is a job of its own. (The
 * toolkit imports no SDK package, so not `parseFireId` of `@fenced/shared`.)
 */
const jobOf = (fireId: string): string => {
  const at = fireId.lastIndexOf('@');
  return at > 0 ? fireId.slice(0, at) : fireId;
};

/** The last of `sorted` (by `at`) made before `at`, by binary search. */
function lastBefore<T extends { readonly at: number }>(sorted: readonly T[], at: number): T | undefined {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]!.at < at) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? undefined : sorted[lo - 1];
}

/**
 * Where a fire's wait is judged from: when it was due, or the end of the fault it came due in; then,
 * for each later fault that began before its dispatch while it was still within its bound
 * (`boundFrom(start, faultStart)`), that fault's end. `faults` are merged and sorted.
 */
function waitingFrom(scheduledAt: number, dispatchedAt: number, faults: ReadonlyArray<{ start: number; end: number }>, boundFrom: (start: number, until: number) => number): number {
  let from = scheduledAt;
  for (const f of faults) {
    if (f.end < from) continue;
    if (f.start >= dispatchedAt) break;
    // Due inside it, or hit while it waited in time: the wait starts again when the fault ends.
    if (f.start <= from || f.start <= boundFrom(from, f.start)) from = Math.max(from, f.end);
    else break;
  }
  return from;
}

/** Each replica's handler runs, from a dispatch to the `handled` line of that fire after it, in order. */
function busyIntervals(history: readonly HistoryEvent[]): Map<string, Array<{ start: number; end: number }>> {
  const open = new Map<string, number>(); // node + fire id -> dispatched at
  const byNode = new Map<string, Array<{ start: number; end: number }>>();
  for (const e of history) {
    if (e.kind === 'dispatch') open.set(`${e.node}\u0000${e.fireId}`, e.at);
    else if (e.kind === 'handled') {
      const key = `${e.node}\u0000${e.fireId}`;
      const start = open.get(key);
      if (start === undefined) continue;
      open.delete(key);
      const list = byNode.get(e.node) ?? [];
      list.push({ start, end: e.at });
      byNode.set(e.node, list);
    }
  }
  return byNode;
}

/** How long, within [from, until), at least one of the intervals was running (their union, clipped). */
export const busyWithin = coveredWithin;

/**
 * The handler's pre-check: no handler starts for a token below the highest the guard already knew
 * just before it was called (`highestBefore` on the handler's `begin` line). A handler that starts
 * anyway runs its side effects outside the database for a stale fire.
 */
export const noHandlerForStaleToken: Invariant = (input) => {
  const started = input.history.filter(
    (e): e is Extract<HistoryEvent, { kind: 'write' }> => e.kind === 'write' && e.outcome === 'begin' && e.highestBefore !== undefined && BigInt(e.highestBefore) > BigInt(e.token),
  );
  return result(
    started.length,
    started.map((e) => `handler started for a stale token: ${e.node} began ${e.fireId} with token ${e.token} when the guard already held ${e.highestBefore}`),
  );
};

/**
 * The handler's pre-check fails closed: while every replica is cut off from both PostgreSQL and
 * Redis, no handler starts (the pre-check cannot ask either, so it must refuse). A begin line in the
 * first `settleMs` of such a fault may come from a pre-check that passed just before it began.
 */
export const noHandlerWhileGuardUnreachable: Invariant = (input) => {
  const settleMs = 300;
  const bothCut = faultIntervals(input.history, input.window.end, (fault) => fault.unreachable?.includes('postgres') === true && fault.unreachable.includes('redis'));
  const windows = bothCut.map((w) => ({ start: w.start + settleMs, end: w.end }));
  const started = input.history.filter(
    (e): e is Extract<HistoryEvent, { kind: 'write' }> => e.kind === 'write' && e.outcome === 'begin' && windows.some((w) => w.start <= e.at && e.at <= w.end),
  );
  return result(
    started.length,
    started.map((e) => `handler started while the guard could not be reached: ${e.node} began ${e.fireId} with token ${e.token} with PostgreSQL and Redis both cut off`),
  );
};

/**
 * The guard's Redis mark is a cache of the fence, raised after the commit: it is never ahead of the
 * fence PostgreSQL committed, or it would refuse a current leader's writes.
 */
export const markNotAheadOfFence: Invariant = (input) => {
  const ahead = (input.fences ?? []).filter((f) => f.mark !== null && (f.fence === null || BigInt(f.mark) > BigInt(f.fence)));
  return result(
    ahead.length,
    ahead.map((f) => `Redis mark ahead of the fence on ${f.resource}: mark ${f.mark}, committed fence ${f.fence ?? 'none'}`),
  );
};

/** Per fire whose write failed at least once, its first failed write. */
export function firstFailedWrites(history: readonly HistoryEvent[]): Map<string, Extract<HistoryEvent, { kind: 'write' }>> {
  const failed = new Map<string, Extract<HistoryEvent, { kind: 'write' }>>();
  for (const e of history) if (e.kind === 'write' && e.outcome === 'failed' && !failed.has(e.fireId)) failed.set(e.fireId, e);
  return failed;
}

/** A fire whose write failed (rolled back) takes effect on a later delivery: dedupe claims nothing for a failed write. */
export const failedWritesApplyLater: Invariant = (input, byCommit) => {
  const applied = new Set(byCommit.map((e) => e.fireId));
  const lost = [...firstFailedWrites(input.history).values()].filter((e) => !applied.has(e.fireId));
  return result(
    lost.length,
    lost.map((e) => `a failed write never took effect later: ${e.fireId} (first failed on ${e.node}: ${e.reason ?? 'no reason given'})`),
  );
};

/**
 * Liveness: outside the faults, someone dispatches at least every `recoveryMs`. A stretch without a
 * dispatch is measured without the time faults covered (a fault may stop everyone; recovering from it
 * may not take longer than the bound). Not judged without `recoveryMs`.
 */
export const noLongSilence: Invariant = (input) => {
  const recoveryMs = input.recoveryMs;
  if (recoveryMs === undefined) return result(0, []);
  const silences = uncoveredSilences(input.history, input.window);
  const long = silences.filter((s) => s.uncoveredMs > recoveryMs);
  return result(
    long.length,
    long.map((s) => `no dispatch for ${Math.round(s.uncoveredMs)} ms outside faults (bound ${recoveryMs} ms), from ${Math.round(s.start - input.window.start)} ms into the window`),
  );
};

/** Stretches between dispatches inside the window, each with how much of it no fault covered. */
export function uncoveredSilences(history: readonly HistoryEvent[], window: CheckInput['window']): Array<{ start: number; end: number; uncoveredMs: number }> {
  const faults = faultIntervals(history, window.end);
  const times = history
    .filter((e) => e.kind === 'dispatch' && e.at >= window.start && e.at <= window.end)
    .map((e) => e.at)
    .sort((a, b) => a - b);
  const out: Array<{ start: number; end: number; uncoveredMs: number }> = [];
  let previous = window.start;
  for (const t of [...times, window.end]) {
    const covered = faults.reduce((sum, f) => sum + Math.max(0, Math.min(f.end, t) - Math.max(f.start, previous)), 0);
    out.push({ start: previous, end: t, uncoveredMs: t - previous - covered });
    previous = t;
  }
  return out;
}

/**
 * The intervals in which at least one fault (of those `which` picks, by its start event) was on,
 * merged; a fault never ended lasts until `end`.
 */
export function faultIntervals(
  history: readonly HistoryEvent[],
  end: number,
  which: (fault: Extract<HistoryEvent, { kind: 'fault' }>) => boolean = () => true,
): Array<{ start: number; end: number }> {
  const spans = faultSpans(history)
    .filter((span) => which(span.start))
    .map((span) => ({ start: span.start.at, end: Math.max(span.start.at, span.end ?? end) }))
    .sort((a, b) => a.start - b.start);
  const out: Array<{ start: number; end: number }> = [];
  for (const span of spans) {
    const last = out.at(-1);
    if (last !== undefined && span.start <= last.end) last.end = Math.max(last.end, span.end);
    else out.push({ ...span });
  }
  return out;
}

/** The replicas got going: one leader, then a first dispatch, in time (see `CheckInput.startFailure`). */
export const replicasStarted: Invariant = (input) => result(input.startFailure === undefined ? 0 : 1, input.startFailure === undefined ? [] : [input.startFailure]);

/**
 * No replica process dies on its own. A process a fault killed ends by a signal; one that exits with
 * a failure died of something in it (an unheard `error` event, an unhandled rejection): the host
 * down, whatever the data says. Judged in every run, whatever the fault.
 */
export const noReplicaCrashed: Invariant = (input) => {
  const crashes = input.history.filter((e) => e.kind === 'process' && e.event === 'exited' && e.crashed === true);
  return result(
    crashes.length,
    crashes.map((e) => `${e.kind === 'process' ? e.node : ''} exited on its own with a failure ${Math.round(e.at - input.window.start)} ms into the window (an unhandled error?)`),
  );
};

/**
 * After the leader is paused by the scenario's fault (the fault named in `failoverBound`, started on
 * a node that led), another replica is elected within the bound, however long the pause: a leader
 * frozen inside its transaction must not hold the others off. Not judged without `failoverBound`.
 */
export const failoverWithinBound: Invariant = (input) => {
  const bound = input.failoverBound;
  if (bound === undefined) return result(0, []);
  const slow: string[] = [];
  for (const fault of input.history) {
    if (fault.kind !== 'fault' || fault.fault !== bound.fault || fault.phase !== 'start' || fault.target === undefined) continue;
    if (!ledAt(input.history, fault.target, fault.at)) continue;
    const end = input.history.find((e) => e.kind === 'fault' && e.fault === bound.fault && e.phase === 'end' && e.target === fault.target && e.at >= fault.at);
    // A fault healed within the bound owes no failover: the old leader may simply go on.
    if (end !== undefined && end.at - fault.at <= bound.ms) continue;
    const next = input.history.find((e) => e.kind === 'belief' && e.leader && e.node !== fault.target && e.at >= fault.at);
    if (next !== undefined && next.at - fault.at <= bound.ms) continue;
    slow.push(`${fault.target} paused as leader ${Math.round(fault.at - input.window.start)} ms into the window: next leader ${next === undefined ? 'never' : `after ${Math.round(next.at - fault.at)} ms`} (bound ${bound.ms} ms)`);
  }
  return result(slow.length, slow);
};

/** Whether `node` believed it led at `at` (its last belief before then). */
function ledAt(history: readonly HistoryEvent[], node: string, at: number): boolean {
  let leads = false;
  for (const e of history) {
    if (e.at > at) break;
    if (e.kind === 'belief' && e.node === node) leads = e.leader;
    else if (e.kind === 'process' && e.node === node && e.event === 'exited') leads = false;
  }
  return leads;
}
