// The deterministic simulation's invariants, each shown to fail on a history that breaks it: a
// checker that cannot fail proves nothing.
import { fireId } from '@fenced/coordinator';
import { parseToken, type FencedEvent } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { EVERY_MS, judge, T0, TTL_MS, type LedgerRow } from './schedule.js';

const END = T0 + 10 * EVERY_MS + 3 * TTL_MS;
const row = (i: number, token: number, node = 'n0.1'): LedgerRow => ({ fire: fireId('ledger', T0 + i * EVERY_MS), token: parseToken(token), node });
const elected = (at: number, nodeId: string, token: number) => ({ at, event: { type: 'lease.acquired', lease: 'billing', nodeId, token: parseToken(token) } as FencedEvent });
const lost = (at: number, nodeId: string, token: number) => ({ at, event: { type: 'lease.lost', lease: 'billing', nodeId, token: parseToken(token), reason: 'deadline' } as FencedEvent });
/** Every fire from the first on, in order, with token 41: a clean ledger. */
const clean = () => Array.from({ length: 10 }, (_, i) => row(i + 1, 41));

describe("the deterministic simulation's invariants", () => {
  it('pass a clean run', () => {
    expect(judge(clean(), [elected(T0, 'n0.1', 41)], undefined, END, true)).toEqual([]);
  });

  it('fail a stale write committed after a newer token', () => {
    const ledger = clean();
    ledger.splice(5, 1, row(6, 40));
    expect(judge(ledger, [elected(T0, 'n0.1', 41)], undefined, END, true)).toEqual([expect.stringMatching(/^stale write committed: .* with token 40 after token 41$/)]);
  });

  it('fail a fire applied twice', () => {
    expect(judge([...clean(), row(3, 41)], [elected(T0, 'n0.1', 41)], undefined, END, true)).toEqual([expect.stringMatching(/^fire applied twice: /)]);
  });

  it('fail a due fire that never took effect, and a run with no leader ever or none at the end', () => {
    const ledger = clean().filter((r) => r.fire !== fireId('ledger', T0 + 4 * EVERY_MS));
    expect(judge(ledger, [elected(T0, 'n0.1', 41)], undefined, END, true)).toEqual([`1 due fires never took effect, from ${fireId('ledger', T0 + 4 * EVERY_MS)} on`]);
    expect(judge([], [], undefined, END, false)).toEqual(['no leader was ever elected', 'no node leads at the end, after the faults healed']);
  });

  it('fail overlapping beliefs, except for a term begun before a lossy failover', () => {
    const overlapping = [elected(T0, 'n0.1', 41), elected(T0 + 500, 'n1.2', 42), lost(T0 + 600, 'n0.1', 41)];
    expect(judge(clean(), overlapping, undefined, END, true)).toEqual([expect.stringMatching(/^n1\.2 elected at \+500 ms while n0\.1 led/)]);
    expect(judge(clean(), overlapping, T0 + 100, END, true)).toEqual([]);
    const handedOver = [elected(T0, 'n0.1', 41), lost(T0 + 400, 'n0.1', 41), elected(T0 + 500, 'n1.2', 42)];
    expect(judge(clean(), handedOver, undefined, END, true)).toEqual([]);
  });
});
