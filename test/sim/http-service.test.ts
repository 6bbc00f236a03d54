/**
 * The simulation on a scheduler whose job calls an HTTP service of the team's own (examples/http-sim,
 * `pnpm sim:http`), on the pause scenario at a short duration: the leader is stopped between its
 * request's headers and its body, and wakes after a new leader's calls went through. Guarded, the
 * service refuses the late request in its own transaction (the run is clean and the refusals are
 * counted); the control, the same service trusting its callers, shows the damage. And on
 * service-down: the service answers 503, then carries out calls and loses their answers, while the
 * leader keeps its lease; the handler as the README shows it, with no retry of its own, loses no
 * fire and applies none twice; the control's own retry loop applies fires twice.
 */
import { expectGuardedCleanControlDamaged, judgedSimulation, runScript, testDatabaseUrl } from '#test-support';
import { describe, it } from 'vitest';

const simHttp = (args: string[]) => runScript('examples/http-sim/sim.ts', args, { DATABASE_URL: testDatabaseUrl() });

describe('pnpm sim:http', () => {
  // The two scenarios side by side (each its guarded run beside its control): their runs wait on real
  // time far more than they compute, and each judges the starvation it measured.
  it.concurrent('pause: the late request of a leader frozen after its headers is refused (guarded clean), the control shows damage', async () => {
    // Judged runs only: one the machine starved too long to judge is run again (judgedSimulation).
    expectGuardedCleanControlDamaged(await judgedSimulation((seed) => simHttp(['--scenario', 'pause', '--duration', '8s', '--seed', String(seed), '--parallel', '2', '--json']), 7));
  }, 12 * 60_000);

  it.concurrent('service-down: every fire the service failed is delivered again and takes effect once (guarded clean), the control applies fires twice', async () => {
    expectGuardedCleanControlDamaged(await judgedSimulation((seed) => simHttp(['--scenario', 'service-down', '--duration', '8s', '--seed', String(seed), '--parallel', '2', '--json']), 7));
  }, 12 * 60_000);
});
