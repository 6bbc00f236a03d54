import { describe, expect, it } from 'vitest';
import type { Effect, HistoryEvent } from '../history.js';
import { checkRun } from './check-run.js';
import { dueFiresDispatchedInTime } from './layer-invariants.js';
import { starvedIntervals } from './starvation.js';

const window = { start: 0, end: 10_000 };
const starved = (at: number, ms: number, node = 'r1'): HistoryEvent => ({ at, kind: 'starved', node, ms });
const dispatch = (at: number, fireId: string, scheduledAt: number, node = 'r1'): HistoryEvent => ({ at, kind: 'dispatch', node, fireId, token: '1', scheduledAt });
const pause = (at: number, phase: 'start' | 'end', target = 'r1'): HistoryEvent => ({ at, kind: 'fault', fault: 'pause', phase, target });
const effect = (fireId: string, token: number, commitSeq: number, node = 'r1'): Effect => ({ resource: 'ledger', fireId, token: BigInt(token), node, commitSeq, scheduledAt: 0, committedAt: 1 });

describe('starvedIntervals', () => {
  it('takes each report as the stretch before it was read, per process, leaving out those that overlap a fault aimed at that process', () => {
    const history = [starved(1000, 300), pause(2000, 'start'), starved(2600, 500), pause(2700, 'end'), starved(2600, 400, 'r2'), starved(3000, 100, 'supervisor')];
    expect(Object.fromEntries(starvedIntervals(history))).toEqual({
      r1: [{ start: 700, end: 1000 }],
      r2: [{ start: 2200, end: 2600 }],
      supervisor: [{ start: 2900, end: 3000 }],
    });
  });
});

describe('the lateness check, on a starved machine', () => {
  // A fire due at 1000 dispatched at 3000; the bound is 500 ms after it was due.
  const judge = (history: HistoryEvent[]) => dueFiresDispatchedInTime({ history, effects: [], expectedFireIds: ['a'], window, recoveryMs: 500 }, []);

  it('credits the time the dispatching replica, or the supervisor, was starved of CPU', () => {
    expect(judge([dispatch(3000, 'a', 1000)]).count).toBe(1);
    expect(judge([starved(2800, 1600), dispatch(3000, 'a', 1000)]).count).toBe(0);
    expect(judge([starved(2800, 1600, 'supervisor'), dispatch(3000, 'a', 1000)]).count).toBe(0);
  });

  it('credits nothing for another replica’s starvation, nor for a pause aimed at the replica itself', () => {
    expect(judge([starved(2800, 1600, 'r2'), dispatch(3000, 'a', 1000)]).count).toBe(1);
    // The pause begins after the fire was already late (a pause that began within its bound would
    // restart its wait at the pause's end): the starvation read during the pause earns nothing.
    expect(judge([pause(1600, 'start'), starved(2800, 1200), pause(2800, 'end'), dispatch(3000, 'a', 1000)]).count).toBe(1);
  });
});

describe('checkRun on a starved machine', () => {
  // A window around the late dispatch alone: no silence to judge, one fire 1500 ms past its bound.
  const around = { start: 2900, end: 3100 };
  const late: HistoryEvent[] = [{ at: 500, kind: 'belief', node: 'r1', leader: true, token: '1' }, dispatch(3000, 'a', 1000)];

  it('fails a lateness break on a machine that let the replicas run', () => {
    const result = checkRun({ history: late, effects: [effect('a', 1, 1)], expectedFireIds: ['a'], window: around, recoveryMs: 500 });
    expect(result.anomalies).toBe(1);
    expect(result.inconclusive).toBeNull();
  });

  it('calls a lateness break left after the credit inconclusive, with the measured starvation, when a process was starved 500 ms or more', () => {
    // r2 was starved (not the dispatching replica): no credit for r1's fire, but the machine was starved.
    const result = checkRun({ history: [...late, starved(4100, 1100, 'r2')], effects: [effect('a', 1, 1)], expectedFireIds: ['a'], window: around, recoveryMs: 500 });
    expect(result.anomalies).toBe(0);
    expect(result.columns.scheduler).toBe(0);
    expect(result.starvedMs).toBe(1100);
    expect(result.inconclusive).toMatchObject({ reason: 'replica r2 starved of CPU for 1.1 s', count: 1, violations: [expect.stringMatching(/past its bound: a by r1/)] });
    // Less starvation than that: judged, and failed.
    expect(checkRun({ history: [...late, starved(3400, 400, 'r2')], effects: [effect('a', 1, 1)], expectedFireIds: ['a'], window: around, recoveryMs: 500 })).toMatchObject({ anomalies: 1, inconclusive: null });
  });

  it('never softens a safety break: a stale write on a starved machine still fails the run', () => {
    const result = checkRun({ history: [{ at: 1, kind: 'belief', node: 'old', leader: true, token: '4' }, { at: 2, kind: 'belief', node: 'new', leader: true, token: '5' }, starved(5000, 4100, 'r2')], effects: [effect('a', 5, 1, 'new'), effect('b', 4, 2, 'old')], expectedFireIds: ['a', 'b'], window });
    expect(result.anomalies).toBe(1);
    expect(result.columns['stale applied']).toBe(1);
    expect(result.inconclusive).toBeNull();
  });

  it('leaves the tail of a run that never settled unjudged only on a starved machine', () => {
    const grant: HistoryEvent = { at: 1, kind: 'belief', node: 'r1', leader: true, token: '1' };
    const missing = { history: [grant, starved(5000, 4100, 'supervisor')], effects: [effect('a', 1, 1)], expectedFireIds: ['a', 'b'], window };
    expect(checkRun({ ...missing, settled: false })).toMatchObject({ anomalies: 0, inconclusive: { reason: 'the supervisor starved of CPU for 4.1 s, and the run did not settle', count: 1 } });
    expect(checkRun({ ...missing, settled: true })).toMatchObject({ anomalies: 1, inconclusive: null });
    expect(checkRun({ ...missing, history: [grant], settled: false })).toMatchObject({ anomalies: 1, inconclusive: null });
  });

  it('makes a run whose replicas never got going a row: a failure of liveness, or inconclusive when starved', () => {
    const startFailure = 'no replica became leader within 30 s';
    expect(checkRun({ history: [], effects: [], expectedFireIds: [], window, startFailure })).toMatchObject({ anomalies: 1, violations: [startFailure] });
    expect(checkRun({ history: [], effects: [], expectedFireIds: [], window, startFailure }).columns.liveness).toBe(1);
    expect(checkRun({ history: [starved(9000, 2000, 'r1')], effects: [], expectedFireIds: [], window, startFailure })).toMatchObject({ anomalies: 0, inconclusive: { count: 1 } });
  });
});
