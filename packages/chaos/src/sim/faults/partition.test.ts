import { describe, expect, it } from 'vitest';
import type { HistoryEvent } from '../../history.js';
import { heldWriteMustWait } from './partition.js';

const belief = (at: number, node: string, leader: boolean): HistoryEvent => (leader ? { at, kind: 'belief', node, leader, token: '4' } : { at, kind: 'belief', node, leader, reason: 'deadline' });

describe("the partition's held write", () => {
  // The partition began at 1000.
  it('waits while the partitioned leader has no successor yet', () => {
    expect(heldWriteMustWait([belief(500, 'r1', true), belief(1_800, 'r1', false)], 'r1', 1_000)).toBe(true);
  });

  it('goes once another replica was elected after the partition began', () => {
    expect(heldWriteMustWait([belief(500, 'r1', true), belief(2_900, 'r3', true)], 'r1', 1_000)).toBe(false);
  });

  it("does not take an election from before the partition, nor the victim's own, for a successor", () => {
    expect(heldWriteMustWait([belief(200, 'r2', true), belief(500, 'r1', true), belief(1_500, 'r1', true)], 'r1', 1_000)).toBe(true);
  });

  it('does not wait for a replica that did not lead when it was partitioned: no newer term is coming for its write', () => {
    expect(heldWriteMustWait([belief(200, 'r2', true), belief(300, 'r1', false)], 'r1', 1_000)).toBe(false);
    expect(heldWriteMustWait([], 'r1', 1_000)).toBe(false);
  });
});
