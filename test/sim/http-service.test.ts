/**
 * The simulation on a scheduler whose job calls an HTTP service of the team's own (examples/http-sim,
 * `pnpm sim:http`), on the pause scenario at a short duration: the leader is stopped between its
 * request's headers and its body, and wakes after a new leader's calls went through. Guarded, the
 * service refuses the late request in its own transaction (the run is clean and the refusals are
 * counted); the control, the same service trusting its callers, shows the damage.
 */
import { runScript, testDatabaseUrl } from '#test-support';
import { describe, expect, it } from 'vitest';

const simHttp = (args: string[]) => runScript('examples/http-sim/sim.ts', args, { DATABASE_URL: testDatabaseUrl() });

describe('pnpm sim:http', () => {
  it('pause: the late request of a leader frozen after its headers is refused (guarded clean), the control shows damage', async () => {
    const result = await simHttp(['--scenario', 'pause', '--duration', '8s', '--seed', '7', '--json']);
    const summary = JSON.parse(result.stdout) as { ok: boolean; runs: Array<{ mode: string; verdict: string; anomalies: number; violations: string[]; protections?: Record<string, number> }> };
    const [guarded, control] = summary.runs;
    expect(guarded?.verdict, guarded?.violations.join('; ')).toBe('no anomaly');
    expect(control?.anomalies).toBeGreaterThan(0);
    expect(result.code, result.stderr).toBe(0);
  }, 5 * 60_000);
});
