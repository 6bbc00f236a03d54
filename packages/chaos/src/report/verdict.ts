import type { CheckResult } from '../checker/check-run.js';
import type { Exercise, Protection } from '../checker/protections.js';
import type { SimMode } from '../sim/sim-app.js';

/** What a verdict is drawn from: the run's mode, its check, and what its scenario must exercise. */
export interface JudgedRun {
  readonly mode: SimMode;
  readonly check: CheckResult;
  readonly exercises?: readonly Exercise[];
}

/** How many times the history shows `protection` at work. */
export function timesExercised(check: CheckResult, protection: Protection): number {
  return check.protections[protection];
}

/**
 * A guarded run passes when it has no anomaly and shows every protection its scenario exercises at
 * work (else it is toothless: the faults missed); a control passes when it shows damage.
 */
export function verdictOf(run: JudgedRun): { ok: boolean; text: string } {
  if (run.mode === 'control') {
    return run.check.anomalies > 0 ? { ok: true, text: `damage shown: ${run.check.anomalies}` } : { ok: false, text: 'no damage: the scenario did not bite' };
  }
  if (run.check.anomalies > 0) return { ok: false, text: `${run.check.anomalies} anomalies` };
  const missing = (run.exercises ?? [])
    .map((e) => (typeof e === 'string' ? [e] : e))
    .filter((anyOf) => anyOf.every((p) => timesExercised(run.check, p) === 0))
    .map((anyOf) => anyOf.join(' or '));
  return missing.length === 0 ? { ok: true, text: 'no anomaly' } : { ok: false, text: `toothless: no ${missing.join(', no ')}` };
}
