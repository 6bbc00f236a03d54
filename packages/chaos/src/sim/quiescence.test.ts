import { describe, expect, it } from 'vitest';
import type { HistoryEvent } from '../history.js';
import { hasSettled } from './quiescence.js';

let at = 0;
const started = (node: string): HistoryEvent => ({ at: ++at, kind: 'process', node, event: 'started' });
const exited = (node: string): HistoryEvent => ({ at: ++at, kind: 'process', node, event: 'exited' });
const leads = (node: string, leader = true): HistoryEvent => ({ at: ++at, kind: 'belief', node, leader, ...(leader ? { token: '1' } : {}) });
const dispatch = (node: string, fireId: string): HistoryEvent => ({ at: ++at, kind: 'dispatch', node, fireId, token: '1' });
const write = (node: string, fireId: string, outcome: 'begin' | 'committed' | 'stale'): HistoryEvent => ({ at: ++at, kind: 'write', node, fireId, token: '1', outcome });

const after = new Set(['late']);
const base = [started('r1'), started('r2'), leads('r1')];

describe('hasSettled', () => {
  it('holds once one replica leads, a fire due after the window went out and every begun write ended', () => {
    expect(hasSettled([...base, dispatch('r1', 'late'), write('r1', 'late', 'begin'), write('r1', 'late', 'committed')], after)).toBe(true);
  });

  it('waits for the schedule to catch up past the window', () => {
    expect(hasSettled([...base, dispatch('r1', 'in-window')], after)).toBe(false);
  });

  it('waits for a begun write to end', () => {
    expect(hasSettled([...base, dispatch('r1', 'late'), write('r1', 'late', 'begin')], after)).toBe(false);
    expect(hasSettled([...base, write('r2', 'old', 'begin'), dispatch('r1', 'late'), write('r2', 'old', 'stale')], after)).toBe(true);
  });

  it('does not wait for a write whose replica was killed before it ended', () => {
    expect(hasSettled([...base, write('r2', 'old', 'begin'), exited('r2'), started('r2'), dispatch('r1', 'late')], after)).toBe(true);
  });

  it('waits while a deposed replica still believes it leads, or while nobody leads', () => {
    expect(hasSettled([...base, leads('r2'), dispatch('r2', 'late')], after)).toBe(false);
    expect(hasSettled([...base, leads('r2'), leads('r1', false), dispatch('r2', 'late')], after)).toBe(true);
    expect(hasSettled([...base, leads('r1', false), dispatch('r1', 'late')], after)).toBe(false);
  });
});
