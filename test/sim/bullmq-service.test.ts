/**
 * The simulation on a service that is not the ledger app: the BullMQ service of
 * examples/bullmq-sim, run as a user runs it (`pnpm sim:bullmq`), on one scenario at a short
 * duration (the whole set is `pnpm sim:bullmq`'s job: about 8 minutes). It keeps the example and the
 * toolkit's contract for other apps (`pendingWork`, `scenarios`) honest.
 */
import { expectGuardedCleanControlDamaged, judgedSimulation, runScript, testDatabaseUrl } from '#test-support';
import { describe, expect, it } from 'vitest';

const simBullmq = (args: string[]) => runScript('examples/bullmq-sim/sim.ts', args, { DATABASE_URL: testDatabaseUrl() });

describe('pnpm sim:bullmq', () => {
  it('refuses a scenario the service does not run, naming the ones it does', async () => {
    const result = await simBullmq(['--scenario', 'cluster-failover']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/this app does not run the cluster-failover scenario: choose from pause, .*slow-clock, all/);
  });

  // Redis restarted without persistence takes the queue with it, jobs and records alike: the new term
  // resumes from the fires that took effect, and the run settles only once the queue is drained.
  it('redis-restart: the guarded service is clean (nothing queued is lost with the queue), the control shows damage', async () => {
    // Judged runs only: one the machine starved too long to judge is run again (judgedSimulation).
    expectGuardedCleanControlDamaged(await judgedSimulation((seed) => simBullmq(['--scenario', 'redis-restart', '--duration', '6s', '--seed', String(seed), '--parallel', '2', '--json']), 7));
  }, 12 * 60_000);
});
