import { describe, expect, it } from 'vitest';
import type { HistoryEvent } from '../../history.js';
import { lagMissedItsPrecondition } from './redis-lag.js';

const lag = { victim: 'r1', from: 1_000, to: 4_000, delayMs: 1_000 };
const dispatch = (at: number, node = 'r1'): HistoryEvent => ({ at, kind: 'dispatch', node, fireId: `f${at}`, token: '3' });
const elected = (at: number, node = 'r2'): HistoryEvent => ({ at, kind: 'belief', node, leader: true, token: '4' });

describe('lagMissedItsPrecondition', () => {
  it('is met when a fire the victim dispatched during the lag had its record land after the next election', () => {
    expect(lagMissedItsPrecondition([dispatch(1_200), elected(2_100)], lag)).toBeUndefined();
    // At the election exactly: the record cannot have counted.
    expect(lagMissedItsPrecondition([dispatch(1_100), elected(2_100)], lag)).toBeUndefined();
  });

  it('is missed when every record landed before the next election, and says how many fires there were', () => {
    expect(lagMissedItsPrecondition([dispatch(1_050), dispatch(1_090), elected(2_100)], lag)).toBe(
      'r2 was elected 1100 ms into the lag, and none of the 2 fires r1 dispatched during it had its record reach Redis after that',
    );
  });

  it('is missed when no other replica was elected during the lag, whatever the victim dispatched', () => {
    expect(lagMissedItsPrecondition([dispatch(1_500), elected(1_600, 'r1'), elected(4_500)], lag)).toBe('no other replica was elected during the 3000 ms lag');
  });

  it('counts the record of a victim held at its failpoint as sent when the lag began', () => {
    // Dispatched before the lag, its record held: sent at 1000, landing at 2000, after r2's election.
    expect(lagMissedItsPrecondition([dispatch(700), dispatch(950), elected(1_900)], { ...lag, heldDispatch: true })).toBeUndefined();
    // Not held: that record went out before the lag, on time.
    expect(lagMissedItsPrecondition([dispatch(700), dispatch(950), elected(1_900)], lag)).toMatch(/none of the 0 fires r1 dispatched during it/);
    // Held, but the election came after the held record landed, and nothing else was dispatched.
    expect(lagMissedItsPrecondition([dispatch(950), elected(2_100)], { ...lag, heldDispatch: true })).toBe(
      'r2 was elected 1100 ms into the lag, and none of the 1 fires r1 dispatched into it had its record reach Redis after that',
    );
  });

  it("counts neither other replicas' dispatches nor events outside the lag", () => {
    expect(lagMissedItsPrecondition([dispatch(900), dispatch(1_900, 'r3'), elected(2_100), dispatch(4_100)], lag)).toMatch(/none of the 0 fires/);
  });
});
