import { describe, expect, it } from 'vitest';
import type { Effect, HistoryEvent } from '../history.js';
import { checkRun, leadershipOverlaps } from './check-run.js';
import { noDuplicateEffect, noEarlyEffect, noMissedFire, noStaleEffect } from './effect-invariants.js';

const effect = (fireId: string, token: number, commitSeq: number, node = 'r1', extra: Partial<Effect> = {}): Effect => ({
  resource: 'ledger',
  fireId,
  token: BigInt(token),
  node,
  commitSeq,
  scheduledAt: 1000 + commitSeq * 100,
  committedAt: 1000 + commitSeq * 100 + 20,
  ...extra,
});

const window = { start: 0, end: 10_000 };
/** The elections a history shows before its writes: a write's token is one some election granted (see model-conformance.ts). */
const elected = (...grants: Array<[node: string, token: number]>): HistoryEvent[] => grants.map(([node, token], i) => ({ at: i, kind: 'belief', node, leader: true, token: String(token) }));

describe('checkRun', () => {
  it('passes a clean run', () => {
    const result = checkRun({ history: elected(['r1', 1], ['r1', 2]), effects: [effect('a', 1, 1), effect('b', 1, 2), effect('c', 2, 3)], expectedFireIds: ['a', 'b', 'c'], window });
    expect(result.anomalies).toBe(0);
    expect(result.violations).toEqual([]);
  });

  it('fails a stale write that took effect (a lower token committed after a higher one)', () => {
    const result = checkRun({ history: elected(['old', 4], ['new', 5]), effects: [effect('a', 5, 1, 'new'), effect('b', 4, 2, 'old')], expectedFireIds: ['a', 'b'], window });
    expect(result.columns['stale applied']).toBe(1);
    expect(result.anomalies).toBe(1);
    expect(result.violations[0]).toMatch(/stale write applied: b with token 4 by old/);
  });

  it('judges staleness by commit order, not by insertion or time', () => {
    // Same rows as above, but the token-4 row committed first: that is fine.
    const result = checkRun({ history: elected(['old', 4], ['new', 5]), effects: [effect('b', 4, 2, 'old'), effect('a', 5, 3, 'new')], expectedFireIds: ['a', 'b'], window });
    expect(result.columns['stale applied']).toBe(0);
  });

  it('fails a fire that took effect twice, and one that never did', () => {
    const result = checkRun({ history: elected(['r1', 1]), effects: [effect('a', 1, 1), effect('a', 1, 2, 'r2')], expectedFireIds: ['a', 'b'], window });
    expect(result.columns['duplicates']).toBe(1);
    expect(result.columns['missed']).toBe(1);
    expect(result.anomalies).toBe(2);
  });

  it('fails a fire that took effect before it was due', () => {
    const result = checkRun({ history: elected(['r1', 1]), effects: [effect('a', 1, 1, 'r1', { scheduledAt: 5000, committedAt: 1000 })], expectedFireIds: ['a'], window });
    expect(result.columns['early']).toBe(1);
  });

  it('fails a fire a few milliseconds early too (both clocks are one host clock), but forgives rounding', () => {
    const early = effect('a', 1, 1, 'r1', { scheduledAt: 5000, committedAt: 4951 }); // 49 ms early, as measured under load
    const rounding = effect('b', 1, 2, 'r1', { scheduledAt: 6000, committedAt: 5999.4 }); // within the millisecond
    const result = checkRun({ history: elected(['r1', 1]), effects: [early, rounding], expectedFireIds: ['a', 'b'], window });
    expect(result.columns['early']).toBe(1);
    expect(result.violations).toEqual(['fire took effect 49 ms early: a by r1']);
  });

  it('counts refusals from the history', () => {
    const history: HistoryEvent[] = [
      ...elected(['r1', 1], ['r2', 2]),
      { at: 3, kind: 'write', node: 'r1', fireId: 'a', token: '1', outcome: 'stale' },
      { at: 4, kind: 'write', node: 'r2', fireId: 'a', token: '2', outcome: 'duplicate' },
    ];
    const result = checkRun({ history, effects: [effect('a', 2, 1, 'r2')], expectedFireIds: [], window });
    expect(result.protections['stale refused']).toBe(1);
    expect(result.protections['duplicate dropped']).toBe(1);
    expect(result.anomalies).toBe(0);
  });

  it('measures the longest stretch without dispatches', () => {
    const history: HistoryEvent[] = [
      { at: 1000, kind: 'dispatch', node: 'r1', fireId: 'a', token: '1' },
      { at: 1200, kind: 'dispatch', node: 'r1', fireId: 'b', token: '1' },
      { at: 4200, kind: 'dispatch', node: 'r2', fireId: 'c', token: '2' },
    ];
    expect(checkRun({ history, effects: [], expectedFireIds: [], window: { start: 1000, end: 5000 } }).maxFailoverGapMs).toBe(3000);
  });
});

describe('leadership overlaps', () => {
  it('finds the window in which two nodes believed they led, and only that', () => {
    const history: HistoryEvent[] = [
      { at: 100, kind: 'belief', node: 'r1', leader: true, token: '1' },
      { at: 2000, kind: 'belief', node: 'r2', leader: true, token: '2' },
      { at: 2600, kind: 'belief', node: 'r1', leader: false },
      { at: 5000, kind: 'process', node: 'r2', event: 'exited' },
      { at: 5200, kind: 'belief', node: 'r3', leader: true, token: '3' },
    ];
    expect(leadershipOverlaps(history, window)).toEqual([{ start: 2000, end: 2600, nodes: ['r1', 'r2'] }]);
  });

  it('marks an overlap harmful when the stale side got a write in', () => {
    const history: HistoryEvent[] = [
      { at: 100, kind: 'belief', node: 'old', leader: true, token: '1' },
      { at: 2000, kind: 'belief', node: 'new', leader: true, token: '2' },
      { at: 2600, kind: 'belief', node: 'old', leader: false },
    ];
    const effects = [effect('x', 2, 1, 'new', { committedAt: 2100 }), effect('y', 1, 2, 'old', { committedAt: 2300 })];
    const result = checkRun({ history, effects, expectedFireIds: [], window });
    expect(result.overlaps).toHaveLength(1);
    expect(result.overlaps[0]!.harmless).toBe(false);
  });
});

describe('one checker per invariant', () => {
  const input = (effects: ReturnType<typeof effect>[], expectedFireIds: string[] = []) => ({ history: elected(['old', 4], ['r1', 5]), effects, expectedFireIds, window });
  const sorted = (effects: ReturnType<typeof effect>[]) => [...effects].sort((a, b) => a.commitSeq - b.commitSeq);

  it('each sees only its own kind of damage, and marks the effects it blames', () => {
    const effects = [effect('a', 5, 1), effect('b', 4, 2, 'old'), effect('a', 5, 3, 'r2'), effect('c', 5, 4, 'r1', { scheduledAt: 9000, committedAt: 4000 })];
    const all = sorted(effects);
    expect(noStaleEffect(input(effects), all)).toMatchObject({ count: 1, marks: [{ commitSeq: 2, kind: 'stale' }] });
    expect(noDuplicateEffect(input(effects), all)).toMatchObject({ count: 1, marks: [{ commitSeq: 3, kind: 'duplicate' }] });
    expect(noEarlyEffect(input(effects), all)).toMatchObject({ count: 1, marks: [{ commitSeq: 4, kind: 'early' }] });
    expect(noMissedFire(input(effects, ['a', 'b', 'c', 'd']), all)).toMatchObject({ count: 1, violations: ['fire never took effect: d'] });
  });

  it('compose into the run check, whose marks are what the report draws', () => {
    const result = checkRun(input([effect('a', 5, 1), effect('b', 4, 2, 'old')], ['a', 'b']));
    expect(result.anomalies).toBe(1);
    expect(result.marks).toEqual([{ commitSeq: 2, kind: 'stale' }]);
  });
});
