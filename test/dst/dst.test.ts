// The deterministic simulation in the test suite: a fixed budget of seeded schedules of the real
// state machines on the in-memory stores (test/dst/schedule.ts), and the same seed replayed bit for
// bit. `pnpm dst --seeds N` runs more.
import { describe, expect, it } from 'vitest';
import { runSchedule } from './schedule.js';

/** The budget: a fixed range of seeds, so that a failure here is a seed anyone can replay. */
const FROM = 0x5eed0000;
const SEEDS = 120;

describe('the deterministic simulation', () => {
  it(`${SEEDS} seeded schedules of faults: no stale write, no fire twice, no fire lost, no overlapping beliefs, a leader at the end`, async () => {
    const failed: string[] = [];
    for (let seed = FROM; seed < FROM + SEEDS; seed++) {
      const result = await runSchedule({ seed });
      if (result.failures.length > 0) failed.push(`seed 0x${seed.toString(16)} (pnpm dst --seed 0x${seed.toString(16)}): ${result.failures.join('; ')} after ${result.faults.join(', ')}`);
      // Every schedule did work: fires took effect and someone was elected.
      expect(result.fires, `seed 0x${seed.toString(16)}`).toBeGreaterThan(20);
    }
    expect(failed).toEqual([]);
  }, 300_000);

  it('replays a seed exactly: the same faults, the same fires, the same elections', async () => {
    const first = await runSchedule({ seed: FROM + 7 });
    const again = await runSchedule({ seed: FROM + 7 });
    expect(again).toEqual(first);
    const other = await runSchedule({ seed: FROM + 8 });
    expect(other.faults).not.toEqual(first.faults);
  });
});
