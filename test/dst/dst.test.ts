// The deterministic simulation in the test suite: a fixed budget of seeded schedules of the real
// state machines on the in-memory stores (test/dst/schedule.ts), and the same seed replayed bit for
// bit. `pnpm dst --seeds N` runs more.
import { describe, expect, it } from 'vitest';
import { runSchedule } from './schedule.js';

/** The budget: a fixed range of seeds, so that a failure here is a seed anyone can replay. */
const FROM = 0x5eed0000;
const SEEDS = 500;

/** Schedules that once broke an invariant, shrunk, each replayed in every run. */
const REGRESSIONS: ReadonlyArray<{ readonly seed: number; readonly faults: readonly number[]; readonly found: string }> = [
  {
    seed: 0x5eed025b,
    faults: [1],
    found:
      "The lease store restarted empty and its replica, which still had the leader's lease, was promoted 13 ms later: the leader's fire record, refused while the store was empty, stood its scheduler down, its renew then passed on the replica, and it led on for good, dispatching nothing (the scheduler now ends the term: Coordinator.forfeit).",
  },
];

describe('the deterministic simulation', () => {
  it(`${SEEDS} seeded schedules of faults: no stale write, no fire twice, no fire lost, no overlapping beliefs, quick graceful handovers, a leader at the end`, async () => {
    const failed: string[] = [];
    let slowClockOverlaps = 0;
    let pausedOverlaps = 0;
    let takeovers = 0;
    let handovers = 0;
    for (let seed = FROM; seed < FROM + SEEDS; seed++) {
      const result = await runSchedule({ seed });
      if (result.failures.length > 0) failed.push(`seed 0x${seed.toString(16)} (pnpm dst --seed 0x${seed.toString(16)}): ${result.failures.join('; ')} after ${result.faults.join(', ')}`);
      // Every schedule did work: fires took effect and someone was elected.
      expect(result.fires, `seed 0x${seed.toString(16)}`).toBeGreaterThan(20);
      slowClockOverlaps += result.excused.filter((e) => e.endsWith('clock ran slow')).length;
      pausedOverlaps += result.excused.filter((e) => e.endsWith('was paused')).length;
      takeovers += result.takeovers;
      handovers += result.handovers;
    }
    expect(failed).toEqual([]);
    // The slow clocks bit: leaders believed past their lease, and the fence absorbed it.
    expect(slowClockOverlaps).toBeGreaterThan(0);
    // So did the pauses: leaders paused past their lease while another was elected, each of which
    // dropped its belief as it ran again.
    expect(pausedOverlaps).toBeGreaterThan(0);
    // And elections ended the writes of deposed leaders frozen in their transactions (the takeover).
    expect(takeovers).toBeGreaterThan(0);
    // And leaders stopped gracefully while their standbys' acquires were in flight, each successor
    // judged by the handover bound.
    expect(handovers).toBeGreaterThan(SEEDS / 10);
  }, 300_000);

  it.each(REGRESSIONS)('replays the regression schedule $seed (faults $faults) cleanly', async ({ seed, faults }) => {
    const result = await runSchedule({ seed, faults });
    expect(result.failures).toEqual([]);
    expect(result.faults.length).toBeGreaterThan(0);
  });

  it('leaves faults out without changing the ones it keeps: the last of the drawn, clock faults, pauses and handovers included', async () => {
    for (let seed = FROM; seed < FROM + 20; seed++) {
      const whole = await runSchedule({ seed });
      const last = whole.drawn - 1;
      const kept = await runSchedule({ seed, faults: [last] });
      expect(kept.faults).toEqual(whole.faults.filter((f) => f.includes(`: [${last}] `)));
      expect(kept.drawn).toBe(whole.drawn);
    }
  });

  it('replays a seed exactly: the same faults, the same fires, the same elections', async () => {
    const first = await runSchedule({ seed: FROM + 7 });
    const again = await runSchedule({ seed: FROM + 7 });
    expect(again).toEqual(first);
    const other = await runSchedule({ seed: FROM + 8 });
    expect(other.faults).not.toEqual(first.faults);
  });
});
