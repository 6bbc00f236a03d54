import { describe, expect, it } from 'vitest';
import type { HistoryEvent } from '../history.js';
import { believedBesideAnother } from './fault-rounds.js';

const belief = (at: number, node: string, leader: boolean): HistoryEvent => ({ at, kind: 'belief', node, leader, ...(leader ? { token: String(at) } : { reason: 'stolen' }) });

describe('believedBesideAnother', () => {
  it('sees the faulted replica still leading once another is elected, in either order of election', () => {
    expect(believedBesideAnother([belief(1, 'r1', true), belief(2, 'r3', true), belief(3, 'r1', false)], 'r1')).toBe(true);
    expect(believedBesideAnother([belief(1, 'r3', true), belief(2, 'r1', true)], 'r1')).toBe(true);
  });

  it('sees none when its belief ended before the next began, or when two others overlapped without it', () => {
    // The failed CI run of 2026-12-04: r1 lost at +1003 ms, r3 elected at +1009 ms.
    expect(believedBesideAnother([belief(0, 'r1', true), belief(1003, 'r1', false), belief(1009, 'r3', true)], 'r1')).toBe(false);
    expect(believedBesideAnother([belief(1, 'r2', true), belief(2, 'r3', true)], 'r1')).toBe(false);
  });

  it('counts an exited replica as believing nothing', () => {
    const exited: HistoryEvent = { at: 2, kind: 'process', node: 'r1', event: 'exited' };
    expect(believedBesideAnother([belief(1, 'r1', true), exited, belief(3, 'r3', true)], 'r1')).toBe(false);
  });
});
