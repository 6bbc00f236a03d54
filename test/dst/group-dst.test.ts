// The deterministic simulation of the lease group in the test suite: a fixed budget of seeded
// schedules of the real LeaseGroup on the in-memory lease store (test/dst/group-schedule.ts), and the
// same seed replayed bit for bit. `pnpm dst --group --seeds N` runs more.
//
// Found by it (2026-12-06), each now a planted bug these seeds catch (scripts/mutants/planted-bugs.ts):
// a stop that ran beside a stop still under way (a stop, a start, a stop) and ended after the start
// between them had opened its hub, closing it: the member's leases, subscribed to nothing, waited out
// retry intervals (`group-stops-side-by-side`, seed 3; it once threw from the hub's listen and left
// leases never competed for); and a coordinator whose subscription failed at start rejected its start
// and never ran an election, even once the store was back (`subscribe-failure-stalls-election`,
// seed 1: a member restarted while cut off from the store).
import { describe, expect, it } from 'vitest';
import { runGroupSchedule } from './group-schedule.js';

/** The budget: a fixed range of seeds, so that a failure here is a seed anyone can replay. */
const FROM = 1;
const SEEDS = 500;

describe('the deterministic simulation of the lease group', () => {
  it(`${SEEDS} seeded schedules of faults: no overlapping beliefs, starts that resolve, stops that leave for good and close what they opened, quick handovers and takeovers, a balanced group at the end`, async () => {
    const failed: string[] = [];
    let handovers = 0;
    let takeovers = 0;
    const faultKinds = new Map<string, number>();
    for (let seed = FROM; seed < FROM + SEEDS; seed++) {
      const result = await runGroupSchedule({ seed });
      if (result.failures.length > 0) failed.push(`seed ${seed} (pnpm dst --group --seed ${seed}): ${result.failures.join('; ')} after ${result.faults.join(', ')}`);
      // Every schedule did work: the six leases were elected, and again after the faults.
      expect(result.elections, `seed ${seed}`).toBeGreaterThanOrEqual(6);
      handovers += result.judged.handovers;
      takeovers += result.judged.takeovers;
      for (const fault of result.faults) {
        const kind = /stopped gracefully|crashed|stopped and started again|cut off|replies delayed/.exec(fault)?.[0] ?? fault;
        faultKinds.set(kind, (faultKinds.get(kind) ?? 0) + 1);
      }
    }
    expect(failed).toEqual([]);
    // The bounds bit: graceful stops and crashes with another member ready, each judged.
    expect(handovers).toBeGreaterThan(SEEDS / 2);
    expect(takeovers).toBeGreaterThan(SEEDS / 10);
    // Every kind of fault ran, many times.
    expect([...faultKinds.keys()].sort()).toEqual(['crashed', 'cut off', 'replies delayed', 'stopped and started again', 'stopped gracefully']);
    for (const [kind, count] of faultKinds) expect(count, kind).toBeGreaterThan(SEEDS / 10);
  }, 300_000);

  it('leaves faults out without changing the ones it keeps', async () => {
    for (let seed = FROM; seed < FROM + 20; seed++) {
      const whole = await runGroupSchedule({ seed });
      const last = whole.drawn - 1;
      const kept = await runGroupSchedule({ seed, faults: [last] });
      expect(kept.faults).toEqual(whole.faults.filter((f) => f.includes(`: [${last}] `)));
      expect(kept.drawn).toBe(whole.drawn);
    }
  });

  it('replays a seed exactly: the same faults, the same elections, the same events', async () => {
    const first = await runGroupSchedule({ seed: FROM + 7 });
    const again = await runGroupSchedule({ seed: FROM + 7 });
    expect(again).toEqual(first);
    const other = await runGroupSchedule({ seed: FROM + 8 });
    expect(other.faults).not.toEqual(first.faults);
  });
});
