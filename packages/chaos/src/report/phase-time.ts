import type { RunPhase, RunResult } from '../sim/run-scenario.js';

/** The phases of a run, in the order they happen. */
const PHASES: readonly RunPhase[] = ['servers', 'start', 'faults', 'settle', 'check', 'teardown'];

/**
 * Where the runs' wall time went, summed per phase over every run, as one line:
 * `sim: time by phase over 52 runs: servers 12.0 s, start 80.3 s, …`. The suite's time is mostly
 * the simulation's, and this says which part of a run to shorten.
 */
export function phaseTimeLine(results: readonly Pick<RunResult, 'phaseMs'>[]): string {
  const sums = PHASES.map((phase) => results.reduce((sum, r) => sum + (r.phaseMs[phase] ?? 0), 0));
  const total = sums.reduce((a, b) => a + b, 0);
  const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  return `sim: time by phase over ${results.length} runs: ${PHASES.map((phase, i) => `${phase} ${seconds(sums[i]!)}`).join(', ')} (total ${seconds(total)})`;
}
