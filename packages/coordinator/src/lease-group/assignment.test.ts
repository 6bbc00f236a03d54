import { describe, expect, it } from 'vitest';
import { assignLeases } from './assignment.js';

const leases = Array.from({ length: 1000 }, (_, i) => `shard-${i}`);
const loads = (assignment: Map<string, string>) => {
  const counts = new Map<string, number>();
  for (const owner of assignment.values()) counts.set(owner, (counts.get(owner) ?? 0) + 1);
  return counts;
};

describe('assignLeases', () => {
  it('gives every lease exactly one owner, each member ⌊N/P⌋ or ⌈N/P⌉ of them', () => {
    for (const members of [['a'], ['a', 'b'], ['a', 'b', 'c'], ['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7']]) {
      const assignment = assignLeases(leases, members);
      expect(assignment.size).toBe(leases.length);
      const counts = [...loads(assignment).values()];
      expect(counts).toHaveLength(members.length);
      for (const c of counts) {
        expect(c).toBeGreaterThanOrEqual(Math.floor(leases.length / members.length));
        expect(c).toBeLessThanOrEqual(Math.ceil(leases.length / members.length));
      }
    }
  });

  it('is the same whatever the order members and leases are listed in', () => {
    const one = assignLeases(leases, ['a', 'b', 'c']);
    const other = assignLeases([...leases].reverse(), ['c', 'a', 'b']);
    expect(other).toEqual(one);
  });

  it('moves few leases when a member joins or leaves', () => {
    const before = assignLeases(leases, ['a', 'b', 'c']);
    const joined = assignLeases(leases, ['a', 'b', 'c', 'd']);
    const moved = leases.filter((l) => before.get(l) !== joined.get(l));
    // d must get its quarter; little else moves.
    expect(moved.filter((l) => joined.get(l) === 'd')).toHaveLength(250);
    expect(moved.length).toBeLessThanOrEqual(250 + 100);

    const left = assignLeases(leases, ['a', 'b']);
    const movedOnLeave = leases.filter((l) => before.get(l) !== left.get(l));
    expect(movedOnLeave.filter((l) => before.get(l) === 'c').length).toBe([...before.values()].filter((o) => o === 'c').length);
    expect(movedOnLeave.length).toBeLessThanOrEqual(334 + 100);
  });

  it('assigns nothing without members', () => {
    expect(assignLeases(leases, []).size).toBe(0);
  });
});
