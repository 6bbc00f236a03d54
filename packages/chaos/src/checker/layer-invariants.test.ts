import { describe, expect, it } from 'vitest';
import type { Effect, HistoryEvent } from '../history.js';
import type { CheckInput } from './check-run.js';
import {
  dispatchWithinOwnTerm,
  dueFiresDispatchedInTime,
  failedWritesApplyLater,
  faultIntervals,
  markNotAheadOfFence,
  noEarlyDispatch,
  noHandlerForStaleToken,
  noHandlerWhileGuardUnreachable,
  noLongSilence,
  noReplicaCrashed,
  failoverWithinBound,
  busyWithin,
} from './layer-invariants.js';

const window = { start: 1000, end: 11_000 };
const input = (history: HistoryEvent[], extra: Partial<CheckInput> = {}): CheckInput => ({ history, effects: [], expectedFireIds: [], window, ...extra });
const dispatch = (at: number, fireId: string, extra: Partial<Extract<HistoryEvent, { kind: 'dispatch' }>> = {}): HistoryEvent => ({
  at,
  kind: 'dispatch',
  node: 'r1',
  fireId,
  token: '5',
  ...extra,
});
const fault = (at: number, phase: 'start' | 'end'): HistoryEvent => ({ at, kind: 'fault', fault: 'pause', phase, target: 'r1' });
const effect = (fireId: string): Effect => ({ resource: 'ledger', fireId, token: 5n, node: 'r1', commitSeq: 1, scheduledAt: 0, committedAt: 0 });

describe('the scheduler, from its dispatches', () => {
  it('breaks when a replica dispatches after its own lease ended, and only then', () => {
    const result = dispatchWithinOwnTerm(input([dispatch(1100, 'a', { leading: true }), dispatch(1200, 'b', { leading: false }), dispatch(1300, 'c')]), []);
    expect(result).toMatchObject({ count: 1, violations: [expect.stringMatching(/r1 dispatched b with token 5 while its lease/)] });
  });

  it('breaks on a dispatch stamped before its fire was due by more than the tolerance', () => {
    const history = [dispatch(2000, 'on-time', { scheduledAt: 2000 }), dispatch(1999, 'rounding', { scheduledAt: 2000 }), dispatch(1500, 'early', { scheduledAt: 2000 })];
    expect(noEarlyDispatch(input(history), [])).toMatchObject({ count: 1, violations: ['dispatched 500 ms early: early by r1'] });
  });

  it('wants every due fire dispatched within the bound after it was due, or after the fault it came due in', () => {
    const history = [
      dispatch(2400, 'in-time', { scheduledAt: 2000 }),
      dispatch(3000, 'late', { scheduledAt: 2000 }),
      fault(4000, 'start'),
      fault(6000, 'end'),
      // Due during the fault: its bound runs from the fault's end.
      dispatch(6400, 'after-fault', { scheduledAt: 4500 }),
      dispatch(7000, 'after-fault-late', { scheduledAt: 4500 }),
      dispatch(7100, 'after-fault-late', { scheduledAt: 4500 }),
    ];
    const result = dueFiresDispatchedInTime(input(history, { recoveryMs: 500, expectedFireIds: ['in-time', 'late', 'after-fault', 'after-fault-late', 'never'] }), []);
    expect(result.count).toBe(3);
    expect(result.violations).toEqual([
      'dispatched 500 ms past its bound: late by r1, 1000 ms after it was due',
      'dispatched 500 ms past its bound: after-fault-late by r1, 2500 ms after it was due',
      'never dispatched: never',
    ]);
  });
});

describe('a fire still waiting when a fault begins', () => {
  const judge = (history: HistoryEvent[], ids: string[]) => dueFiresDispatchedInTime(input(history, { recoveryMs: 500, expectedFireIds: ids }), []);

  it('is judged from the end of the fault when the fault began while it was within its bound (a backlog hit mid-drain)', () => {
    // Due at 2000, its bound 2500; the replica draining it is hit at 2300 until 4000.
    const history = [fault(2300, 'start'), fault(4000, 'end'), dispatch(4400, 'waiting', { scheduledAt: 2000 })];
    expect(judge(history, ['waiting'])).toMatchObject({ count: 0 });
    // Still bounded after the fault: past 4500 it is late.
    const late = [fault(2300, 'start'), fault(4000, 'end'), dispatch(4700, 'waiting', { scheduledAt: 2000 })];
    expect(judge(late, ['waiting']).violations).toEqual(['dispatched 200 ms past its bound: waiting by r1, 2700 ms after it was due']);
  });

  it('is judged from each fault in turn while every one of them began within its bound', () => {
    const history = [fault(2300, 'start'), fault(3000, 'end'), fault(3400, 'start'), fault(5000, 'end'), dispatch(5400, 'twice hit', { scheduledAt: 2000 })];
    expect(judge(history, ['twice hit'])).toMatchObject({ count: 0 });
    // The second fault began 900 ms after the first ended: past the bound; the fire was late before it.
    const lateBetween = [fault(2300, 'start'), fault(3000, 'end'), fault(3900, 'start'), fault(5000, 'end'), dispatch(5400, 'late between', { scheduledAt: 2000 })];
    expect(judge(lateBetween, ['late between']).violations).toEqual(['dispatched 1900 ms past its bound: late between by r1, 3400 ms after it was due']);
  });

  it('is credited, before the fault, with the busy time of the replica that was dispatching its job then, not the one that dispatched it after', () => {
    const handled = (at: number, fireId: string, node: string): HistoryEvent => ({ at, kind: 'handled', node, fireId });
    // r3 drains a backlog: the fire before this one runs 2000-2900, then r3 is hit; r2 leads after.
    const history = [
      dispatch(2000, 'job@1', { scheduledAt: 1900, node: 'r3' }),
      handled(2900, 'job@1', 'r3'),
      fault(2900, 'start'),
      fault(4000, 'end'),
      dispatch(4300, 'job@2', { scheduledAt: 2000, node: 'r2' }),
    ];
    expect(judge(history, ['job@2'])).toMatchObject({ count: 0 });
    // Another job's replica earns it nothing: judged from when it was due.
    const otherJob = history.map((e) => (e.kind === 'dispatch' && e.fireId === 'job@1' ? { ...e, fireId: 'other@1' } : e.kind === 'handled' ? { ...e, fireId: 'other@1' } : e));
    expect(judge(otherJob, ['job@2']).violations).toEqual(['dispatched 1800 ms past its bound: job@2 by r2, 2300 ms after it was due']);
  });

  it('is still late when it was already past its bound before the fault began: the fault forgives nothing before it', () => {
    // Due at 2000, its bound 2500; the fault begins at 2600, after the fire was already late.
    const history = [fault(2600, 'start'), fault(4000, 'end'), dispatch(4400, 'late before', { scheduledAt: 2000 })];
    expect(judge(history, ['late before']).violations).toEqual(['dispatched 1900 ms past its bound: late before by r1, 2400 ms after it was due']);
  });

  it('ignores a fault that began after its dispatch', () => {
    const history = [dispatch(2700, 'late', { scheduledAt: 2000 }), fault(2800, 'start'), fault(4000, 'end')];
    expect(judge(history, ['late']).violations).toEqual(['dispatched 200 ms past its bound: late by r1, 700 ms after it was due']);
  });
});

describe('a backlog after a fault, drained one fire at a time', () => {
  const handled = (at: number, fireId: string, node = 'r1'): HistoryEvent => ({ at, kind: 'handled', node, fireId });
  // A fault from 2000 to 3000; fires a…d came due during it, each handler takes 400 ms; the bound is 500 ms.
  const backlog = (gapBeforeD: number, handledBy = 'r1'): HistoryEvent[] => [
    fault(2000, 'start'),
    fault(3000, 'end'),
    dispatch(3100, 'a', { scheduledAt: 2100 }),
    handled(3500, 'a', handledBy),
    dispatch(3500, 'b', { scheduledAt: 2200 }),
    handled(3900, 'b', handledBy),
    dispatch(3900, 'c', { scheduledAt: 2300 }),
    handled(4300, 'c', handledBy),
    dispatch(4300 + gapBeforeD, 'd', { scheduledAt: 2400 }),
  ];
  const judge = (history: HistoryEvent[]) => dueFiresDispatchedInTime(input(history, { recoveryMs: 500, expectedFireIds: ['a', 'b', 'c', 'd'] }), []);

  it('is in time while the job was busy with the fires before it, back to back', () => {
    expect(judge(backlog(0))).toMatchObject({ count: 0 });
  });

  it('is late when the scheduler sat idle past the bound with the job free', () => {
    expect(judge(backlog(700)).violations).toEqual(['dispatched 300 ms past its bound: d by r1, 2600 ms after it was due (1200 ms of it busy with earlier fires or starved of CPU)']);
  });

  it('earns nothing from another replica’s busy handlers', () => {
    expect(judge(backlog(0, 'r2')).count).toBe(2);
  });

  it('counts overlapping busy time once, and only inside the window asked', () => {
    expect(busyWithin([{ start: 0, end: 100 }, { start: 50, end: 150 }, { start: 300, end: 400 }], 20, 350)).toBe(130 + 50);
    expect(busyWithin([{ start: 0, end: 100 }], 100, 200)).toBe(0);
  });
});

describe('the handler, from its starts', () => {
  it('breaks when a handler begins for a token below what the guard knew just before', () => {
    const begin = (fireId: string, token: string, highestBefore?: string): HistoryEvent => ({
      at: 3000,
      kind: 'write',
      node: 'r1',
      fireId,
      token,
      outcome: 'begin',
      ...(highestBefore === undefined ? {} : { highestBefore }),
    });
    const history = [begin('current', '5', '5'), begin('stale-started', '5', '6'), begin('unknown', '5'), begin('newer', '7', '6')];
    expect(noHandlerForStaleToken(input(history), [])).toMatchObject({
      count: 1,
      violations: ['handler started for a stale token: r1 began stale-started with token 5 when the guard already held 6'],
    });
  });
});

describe('the handler, while the stores are cut off', () => {
  it('breaks on a handler started while PostgreSQL and Redis were both unreachable, past the first moments', () => {
    const cut = (at: number, phase: 'start' | 'end', unreachable?: ('postgres' | 'redis')[]): HistoryEvent => ({ at, kind: 'fault', fault: 'postgres down', phase, ...(unreachable ? { unreachable } : {}) });
    const begin = (at: number, fireId: string): HistoryEvent => ({ at, kind: 'write', node: 'r1', fireId, token: '5', outcome: 'begin' });
    const history = [
      cut(1000, 'start', ['postgres']),
      begin(1500, 'redis-answered'), // Redis up: the pre-check may pass on Redis alone
      cut(2000, 'end'),
      cut(3000, 'start', ['postgres', 'redis']),
      begin(3100, 'checked-just-before'),
      begin(3500, 'unguarded'),
      cut(4000, 'end'),
      begin(4100, 'after'),
    ];
    expect(noHandlerWhileGuardUnreachable(input(history), [])).toMatchObject({
      count: 1,
      violations: ['handler started while the guard could not be reached: r1 began unguarded with token 5 with PostgreSQL and Redis both cut off'],
    });
  });
});

describe('the guard and the dedupe, from the stores', () => {
  it('breaks on a Redis mark above the committed fence, not on one below or missing', () => {
    const fences = [
      { resource: 'equal', fence: '7', mark: '7' },
      { resource: 'behind', fence: '10', mark: '9' },
      { resource: 'lost', fence: '7', mark: null },
      { resource: 'ahead', fence: '9', mark: '10' },
    ];
    expect(markNotAheadOfFence(input([], { fences }), [])).toMatchObject({ count: 1, violations: ['Redis mark ahead of the fence on ahead: mark 10, committed fence 9'] });
  });

  it('wants a fire whose write failed to take effect on a later delivery', () => {
    const failed = (fireId: string): HistoryEvent => ({ at: 2000, kind: 'write', node: 'r1', fireId, token: '5', outcome: 'failed', reason: 'connection refused' });
    const result = failedWritesApplyLater(input([failed('retried'), failed('lost')]), [effect('retried')]);
    expect(result).toMatchObject({ count: 1, violations: ['a failed write never took effect later: lost (first failed on r1: connection refused)'] });
  });
});

describe('liveness', () => {
  it('measures silences without the time faults covered, and breaks only past the bound', () => {
    const history = [dispatch(1500, 'a'), fault(2000, 'start'), fault(5000, 'end'), dispatch(5400, 'b'), dispatch(7000, 'c')];
    // 1500 → 5400 is 3900 ms, 3000 of them under the fault: 900 uncovered. 5400 → 7000: 1600. 7000 → 11000: 4000.
    const result = noLongSilence(input(history, { recoveryMs: 1000 }), []);
    expect(result.count).toBe(2);
    expect(result.violations[0]).toBe('no dispatch for 1600 ms outside faults (bound 1000 ms), from 4400 ms into the window');
  });

  it('merges overlapping faults, and a fault never ended lasts to the end', () => {
    const history = [fault(100, 'start'), fault(200, 'start'), fault(300, 'end'), fault(400, 'end'), fault(900, 'start')];
    expect(faultIntervals(history, 2000)).toEqual([
      { start: 100, end: 400 },
      { start: 900, end: 2000 },
    ]);
  });
});

describe('liveness: the processes and the failover', () => {
  const belief = (at: number, node: string, leader: boolean): HistoryEvent => ({ at, kind: 'belief', node, leader, token: '5' });
  const exited = (at: number, crashed?: boolean): HistoryEvent => ({ at, kind: 'process', node: 'r2', event: 'exited', ...(crashed === undefined ? {} : { crashed }) });

  it('breaks on a replica that exited on its own with a failure, not on one a fault killed', () => {
    expect(noReplicaCrashed(input([exited(2000), exited(3000, false)]), []).count).toBe(0);
    expect(noReplicaCrashed(input([exited(2000), exited(3000, true)]), [])).toMatchObject({ count: 1, violations: [expect.stringMatching(/r2 exited on its own with a failure 2000 ms into the window/)] });
  });

  it('wants another leader within the bound after the leader was paused, however long the pause', () => {
    const bound = { failoverBound: { ms: 2250, fault: 'pause' } };
    const paused = [belief(1100, 'r1', true), fault(2000, 'start')];
    // On time: r2 leads 2000 ms after the pause began, and the pause lasts on.
    expect(failoverWithinBound(input([...paused, belief(4000, 'r2', true), fault(6000, 'end')], bound), []).count).toBe(0);
    // Late: 3000 ms, while the pause lasted on.
    expect(failoverWithinBound(input([...paused, belief(5000, 'r2', true), fault(6000, 'end')], bound), [])).toMatchObject({
      count: 1,
      violations: [expect.stringMatching(/r1 paused as leader 1000 ms into the window: next leader after 3000 ms \(bound 2250 ms\)/)],
    });
    // Never.
    expect(failoverWithinBound(input([...paused, fault(9000, 'end')], bound), []).count).toBe(1);
  });

  it('owes no failover for a pause healed within the bound, nor for one that hit a standby, nor without a bound', () => {
    const bound = { failoverBound: { ms: 2250, fault: 'pause' } };
    expect(failoverWithinBound(input([belief(1100, 'r1', true), fault(2000, 'start'), fault(3000, 'end')], bound), []).count).toBe(0);
    expect(failoverWithinBound(input([belief(1100, 'r2', true), fault(2000, 'start'), fault(9000, 'end')], bound), []).count).toBe(0);
    expect(failoverWithinBound(input([belief(1100, 'r1', true), fault(2000, 'start'), fault(9000, 'end')]), []).count).toBe(0);
  });
});
