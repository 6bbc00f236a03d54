import { createHash } from 'node:crypto';

/**
 * Which live member should lead each lease: rendezvous (highest random weight) hashing with a cap of
 * ⌊N/P⌋ or ⌈N/P⌉ leases per member, so the split is as even as it can be.
 *
 * Every member computes the same answer from the same member list, with no coordination: leases
 * are taken in a fixed order (their own hash), and each goes to the highest-ranked member for it that
 * still has room. A member's rank for a lease depends only on the two names, so a join or a leave
 * moves few leases (mostly those the newcomer ranks first, or those the leaver held).
 *
 * It cannot flap: the answer changes only when the member list does, and a member stays on the list
 * as long as its heartbeats keep arriving (see lease-group.ts and lua/heartbeat-1.lua).
 */
export function assignLeases(leases: readonly string[], members: readonly string[]): Map<string, string> {
  const assignment = new Map<string, string>();
  if (members.length === 0) return assignment;
  const unique = [...new Set(leases)];
  const sortedMembers = [...new Set(members)].sort();
  // Exactly N leases of room: the first N mod P members (by name) take one more than the others.
  const base = Math.floor(unique.length / sortedMembers.length);
  const extra = unique.length % sortedMembers.length;
  const room = new Map(sortedMembers.map((m, i) => [m, base + (i < extra ? 1 : 0)]));
  const order = unique.map((lease) => ({ lease, key: weight(lease, '') })).sort((a, b) => compare(a.key, b.key) || (a.lease < b.lease ? -1 : 1));
  for (const { lease } of order) {
    let owner: string | undefined;
    let best = -1n;
    for (const member of sortedMembers) {
      if (room.get(member)! === 0) continue;
      const w = weight(lease, member);
      if (w > best) [owner, best] = [member, w];
    }
    room.set(owner!, room.get(owner!)! - 1);
    assignment.set(lease, owner!);
  }
  return assignment;
}

/** A 64-bit weight of the pair, from SHA-256 (stable across processes and versions). */
function weight(lease: string, member: string): bigint {
  return createHash('sha256').update(lease).update('\0').update(member).digest().readBigUInt64BE(0);
}

const compare = (a: bigint, b: bigint): number => (a < b ? -1 : a > b ? 1 : 0);
