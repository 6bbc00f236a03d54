import { expect } from 'vitest';

/** One run of a `pnpm sim` summary (`--json`). */
export interface SimSummaryRun {
  readonly scenario: string;
  readonly mode: string;
  readonly verdict: string;
  readonly anomalies: number;
  readonly violations: string[];
  readonly protections?: Record<string, number>;
  /** Where a failed run was kept (its history, check, replicas' logs and the report). */
  readonly kept?: string;
}

export interface SimSummary {
  readonly ok: boolean;
  readonly inconclusive: number;
  readonly runs: SimSummaryRun[];
}

/**
 * Runs a simulation (`simulate(seed)`: a `pnpm sim` with `--json`) until none of its runs is
 * inconclusive, up to three times, the seed one higher each time: the machine is busy (CI runs beside
 * CPU hogs), and a run it starved too long to judge its timing proves nothing about it, so a test
 * must not pass on it. A run that failed is returned at once; so is the third try, judged or not.
 */
export async function judgedSimulation(
  simulate: (seed: number) => Promise<{ code: number | null; stdout: string; stderr: string }>,
  seed: number,
): Promise<{ code: number | null; stderr: string; summary: SimSummary }> {
  let last: { code: number | null; stderr: string; summary: SimSummary } | undefined;
  for (let attempt = 0; attempt < 3; attempt++) {
    const result = await simulate(seed + attempt);
    let summary: SimSummary;
    try {
      summary = JSON.parse(result.stdout) as SimSummary;
    } catch {
      throw new Error(`the simulation printed no summary (exit ${result.code}); its stderr ends:\n${result.stderr.slice(-4000)}`);
    }
    last = { code: result.code, stderr: result.stderr, summary };
    if (!summary.ok || summary.inconclusive === 0) break;
  }
  return last!;
}

/**
 * What a one-scenario simulation must show: its guarded run clean (the violations named when not),
 * its control damaged, exit 0.
 */
export function expectGuardedCleanControlDamaged(result: { readonly code: number | null; readonly stderr: string; readonly summary: SimSummary }): void {
  const [guarded, control] = result.summary.runs;
  expect(guarded?.verdict, `${guarded?.violations.join('; ')}${guarded?.kept ? ` (kept in ${guarded.kept})` : ''}`).toBe('no anomaly');
  expect(control?.anomalies, control?.kept ? `the control shows no damage (kept in ${control.kept})` : undefined).toBeGreaterThan(0);
  expect(result.code, result.stderr).toBe(0);
}
