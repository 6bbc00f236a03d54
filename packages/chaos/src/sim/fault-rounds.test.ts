import { describe, expect, it } from 'vitest';
import type { HistoryEvent } from '../history.js';
import type { FaultContext } from './fault-context.js';
import { believedBesideAnother, runFaultRounds, type FaultRound } from './fault-rounds.js';

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

describe('runFaultRounds', () => {
  // Seen at `pnpm sim --parallel 6` (2026-12-06): a Sentinel deployment whose replica never synced
  // again threw out of the rounds and ended the whole simulation, with no table, report or kept run.
  it('records a round that throws as the harness failing, in the history, and returns: the run goes on to be checked', async () => {
    const faults: Array<{ fault: string; phase: string; detail?: string }> = [];
    let whole = 0;
    const ctx = {
      ttlMs: 1000,
      remainingMs: 10_000,
      redis: {
        kind: 'replicated',
        waitUntilWhole: async () => {
          whole++;
          throw new Error('the Redis server on 16155 did not sync with its primary within 53775 ms');
        },
      },
      ensureRemaining: () => undefined,
      fault: (fault: string, phase: string, _target?: string, detail?: string) => faults.push({ fault, phase, ...(detail === undefined ? {} : { detail }) }),
    } as unknown as FaultContext;
    const round = {
      gap: { ms: [0, 0] },
      target: { kind: 'redis' },
      fault: { kind: 'primary-failover', variants: ['freeze'], failpoint: 'ledger.written-before-record' },
      hold: { ms: [0, 0] },
      settle: { ms: [0, 0] },
      whileTtlsLeft: 2,
    } as unknown as FaultRound;
    await expect(runFaultRounds(ctx, round)).resolves.toBeUndefined();
    expect(whole).toBe(1);
    expect(faults).toEqual([
      { fault: 'harness failed', phase: 'start', detail: 'the Redis server on 16155 did not sync with its primary within 53775 ms' },
      { fault: 'harness failed', phase: 'end' },
    ]);
  });
});
