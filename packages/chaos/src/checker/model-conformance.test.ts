import { describe, expect, it } from 'vitest';
import type { Effect, HistoryEvent } from '../history.js';
import { checkRun } from './check-run.js';
import { conformsToModel } from './model-conformance.js';

const window = { start: 0, end: 10_000 };
const elected = (at: number, node: string, token: number): HistoryEvent => ({ at, kind: 'belief', node, leader: true, token: String(token) });
const lost = (at: number, node: string): HistoryEvent => ({ at, kind: 'belief', node, leader: false });
const write = (at: number, node: string, fireId: string, token: number, outcome: Extract<HistoryEvent, { kind: 'write' }>['outcome']): HistoryEvent => ({ at, kind: 'write', node, fireId, token: String(token), outcome });
const effect = (fireId: string, token: number, commitSeq: number, node: string): Effect => ({ resource: 'ledger', fireId, token: BigInt(token), node, commitSeq, scheduledAt: 0, committedAt: 1 });

function judge(history: HistoryEvent[], effects: Effect[]) {
  return conformsToModel({ history, effects, expectedFireIds: [], window }, [...effects].sort((a, b) => a.commitSeq - b.commitSeq));
}

describe('trace conformance: each write step is one the model allows', () => {
  // A failover as the model plays it: r1 leads with 1 and writes a; r2 is elected with 2 (the advance
  // raises the fence) and writes b; r1, paused, wakes and is refused as stale; a fire delivered again
  // is refused as a duplicate; a queue's worker r3 writes c with its leader's token.
  const failover: HistoryEvent[] = [
    elected(1, 'r1', 1),
    write(2, 'r1', 'a', 1, 'begin'),
    write(3, 'r1', 'a', 1, 'committed'),
    elected(4, 'r2', 2),
    write(5, 'r2', 'b', 2, 'committed'),
    write(6, 'r1', 'x', 1, 'stale'),
    lost(7, 'r1'),
    write(8, 'r2', 'b', 2, 'duplicate'),
    write(9, 'r3', 'c', 2, 'committed'),
  ];
  const applied = [effect('a', 1, 1, 'r1'), effect('b', 2, 2, 'r2'), effect('c', 2, 3, 'r3')];

  it('passes a history whose every write step the model allows, a queue worker writing with its leader’s token among them', () => {
    expect(judge(failover, applied)).toEqual({ count: 0, violations: [], marks: [] });
    expect(checkRun({ history: failover, effects: applied, expectedFireIds: ['a', 'b', 'c'], window }).columns.model).toBe(0);
  });

  it('fails an effect and a write with a token no election granted', () => {
    const result = judge([...failover, write(10, 'r2', 'd', 7, 'committed')], [...applied, effect('d', 7, 4, 'r2')]);
    expect(result.count).toBe(2);
    expect(result.violations).toEqual([
      'not a step of the model: d committed by r2 with token 7, which no election granted',
      'not a step of the model: a write of d by r2 (committed) with token 7, which no election granted',
    ]);
  });

  it('fails a stale refusal with nothing above it: the highest token in the run refused', () => {
    const result = judge([...failover, write(10, 'r2', 'e', 2, 'stale')], applied);
    expect(result).toMatchObject({ count: 1, violations: ['not a step of the model: e by r2 refused as stale with token 2, the highest token granted or committed in the run'] });
    // A higher token committed (with no election in the history to show it) is enough above it.
    expect(judge([elected(1, 'r1', 1), write(2, 'r1', 'a', 1, 'stale')], [effect('z', 3, 1, 'r9')]).violations).not.toContain(
      'not a step of the model: a by r1 refused as stale with token 1, the highest token granted or committed in the run',
    );
  });

  it('fails a duplicate refusal of a fire that never took effect: a claim without its effect', () => {
    const result = judge([...failover, write(10, 'r2', 'f', 2, 'duplicate')], applied);
    expect(result).toMatchObject({ count: 1, violations: ['not a step of the model: f by r2 refused as a duplicate, but it never took effect'] });
  });

  it('fails a token granted twice (a lossy failover minted it again) that committed writes for both replicas', () => {
    const twice = [...failover, lost(10, 'r2'), elected(11, 'r3', 2)];
    // r3 wrote c with 2 as r2's queue worker before, and now leads with 2 itself: two terms' writes.
    expect(judge(twice, applied)).toMatchObject({ count: 1, violations: ['not a step of the model: token 2, granted to r2 and r3, committed writes for r2 and r3: two terms'] });
    // Granted twice, but only one of its terms committed anything: allowed (the other was refused at its advance).
    expect(judge(twice, applied.filter((e) => e.node !== 'r3')).count).toBe(0);
  });

  it('counts in the model column of the run, a break of the promise', () => {
    const result = checkRun({ history: [...failover, write(10, 'r2', 'f', 2, 'duplicate')], effects: applied, expectedFireIds: ['a', 'b', 'c'], window });
    expect(result.columns.model).toBe(1);
    expect(result.anomalies).toBe(1);
  });
});
