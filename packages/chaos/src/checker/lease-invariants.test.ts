import { describe, expect, it } from 'vitest';
import type { HistoryEvent } from '../history.js';
import type { CheckInput } from './check-run.js';
import { dispatchOnlyWhileLeading, electionsInTokenOrder } from './lease-invariants.js';

let at = 0;
const elected = (node: string, token: string): HistoryEvent => ({ at: ++at, kind: 'belief', node, leader: true, token });
const lost = (node: string): HistoryEvent => ({ at: ++at, kind: 'belief', node, leader: false });
const dispatch = (node: string, token: string): HistoryEvent => ({ at: ++at, kind: 'dispatch', node, fireId: `f${at}`, token });
const exited = (node: string): HistoryEvent => ({ at: ++at, kind: 'process', node, event: 'exited' });
const input = (history: HistoryEvent[]): CheckInput => ({ history, effects: [], expectedFireIds: [], window: { start: 0, end: 1e9 } });

describe('electionsInTokenOrder', () => {
  it('holds while every election hands out a higher token', () => {
    expect(electionsInTokenOrder(input([elected('r1', '1'), lost('r1'), elected('r2', '2'), elected('r1', '10')]), []).count).toBe(0);
  });

  it('breaks on a token that repeats or goes down (a counter that went back)', () => {
    const result = electionsInTokenOrder(input([elected('r1', '3'), elected('r2', '4'), elected('r3', '4'), elected('r1', '1')]), []);
    expect(result.count).toBe(2);
    expect(result.violations[0]).toBe('election out of token order: r3 elected with token 4 after r2 was elected with 4');
  });
});

describe('dispatchOnlyWhileLeading', () => {
  it('holds for dispatches by the leader with its own token', () => {
    expect(dispatchOnlyWhileLeading(input([elected('r1', '1'), dispatch('r1', '1'), lost('r1'), elected('r2', '2'), dispatch('r2', '2')]), []).count).toBe(0);
  });

  it('breaks on a dispatch after the replica stopped leading, after a restart, or with another token', () => {
    const result = dispatchOnlyWhileLeading(input([elected('r1', '1'), lost('r1'), dispatch('r1', '1'), elected('r2', '2'), exited('r2'), dispatch('r2', '2'), elected('r3', '3'), dispatch('r3', '2')]), []);
    expect(result.count).toBe(3);
    expect(result.violations).toEqual([
      expect.stringMatching(/r1 dispatched f\d+ with token 1 while not leading/),
      expect.stringMatching(/r2 dispatched f\d+ with token 2 while not leading/),
      expect.stringMatching(/r3 dispatched f\d+ with token 2 while leading with 3/),
    ]);
  });
});
