import type { CheckResult } from '../checker/check-run.js';
import type { Exercise, Protection } from '../checker/protections.js';
import { HARNESS_FAILED, PRECONDITION_MISSED, type HistoryEvent } from '../history.js';
import type { SimMode } from '../sim/sim-app.js';

/** What a verdict is drawn from: the run's mode, its check, and what its scenario must exercise. */
export interface JudgedRun {
  readonly mode: SimMode;
  readonly check: CheckResult;
  readonly exercises?: readonly Exercise[];
  /** The run's history: a fault that said it missed its precondition makes a toothless run inconclusive. */
  readonly events?: readonly HistoryEvent[];
}

/** How many times the history shows `protection` at work. */
export function timesExercised(check: CheckResult, protection: Protection): number {
  return check.protections[protection];
}

/** A run's verdict: `ok` when it passed; `inconclusive` when it neither passed nor failed (see `CheckResult.inconclusive`). */
export interface Verdict {
  readonly ok: boolean;
  readonly inconclusive: boolean;
  readonly text: string;
}

/**
 * A guarded run passes when it has no anomaly and shows every protection its scenario exercises at
 * work (else it is toothless: the faults missed); a control passes when it shows damage. A run whose
 * timing checks could not be judged (its processes were starved of CPU) and that has no anomaly
 * otherwise is inconclusive, never passed: it says why, and proves nothing about its timing. So is a
 * toothless run, or a control without damage, whose faults said they missed their precondition
 * (`PRECONDITION_MISSED`). A run whose harness failed mid-run (`HARNESS_FAILED`) is failed, naming
 * the error, whatever else it shows (a guarded run's anomalies are named first).
 */
export function verdictOf(run: JudgedRun): Verdict {
  const inconclusive = run.check.inconclusive;
  const unjudged = inconclusive === null ? null : { ok: false, inconclusive: true, text: `inconclusive: ${inconclusive.reason}; ${inconclusive.count} timing ${inconclusive.count === 1 ? 'break' : 'breaks'} not judged` };
  // The faults said they could not set up what they needed (a loaded machine elected too slowly, a
  // lagging leader that dispatched nothing in time): a run that then shows nothing tested nothing,
  // which proves nothing either way. Safety is judged first, and a control passes only on damage.
  const why = faultDetails(run, PRECONDITION_MISSED);
  // The toolkit failed mid-run (HARNESS_FAILED): whatever else the run shows, it did not run its
  // scenario to the end. Safety first: a guarded run's anomalies are named before it.
  const harness = harnessFailures(run);
  const harnessFailed = { ok: false, inconclusive: false, text: `harness failed: ${harness.join('; ')}` };
  if (run.mode === 'control') {
    if (harness.length > 0) return harnessFailed;
    if (run.check.anomalies > 0) return { ok: true, inconclusive: false, text: `damage shown: ${run.check.anomalies}` };
    if (unjudged !== null) return unjudged;
    if (why.length > 0) return { ok: false, inconclusive: true, text: `inconclusive: no damage, the faults missed their precondition (${why.join('; ')})` };
    return { ok: false, inconclusive: false, text: 'no damage: the scenario did not bite' };
  }
  if (run.check.anomalies > 0) return { ok: false, inconclusive: false, text: `${run.check.anomalies} anomalies` };
  if (harness.length > 0) return harnessFailed;
  const missing = (run.exercises ?? [])
    .map((e) => (typeof e === 'string' ? [e] : e))
    .filter((anyOf) => anyOf.every((p) => timesExercised(run.check, p) === 0))
    .map((anyOf) => anyOf.join(' or '));
  if (missing.length > 0) {
    if (why.length > 0) return { ok: false, inconclusive: true, text: `inconclusive: no ${missing.join(', no ')}, the faults missed their precondition (${why.join('; ')})` };
    return { ok: false, inconclusive: false, text: `toothless: no ${missing.join(', no ')}` };
  }
  return unjudged ?? { ok: true, inconclusive: false, text: 'no anomaly' };
}

/** The errors of the toolkit's own failures mid-run (`HARNESS_FAILED`), in the order they happened: empty when it ran whole. */
export function harnessFailures(run: JudgedRun): string[] {
  return faultDetails(run, HARNESS_FAILED);
}

/** The detail each start of `fault` in the run's history gave. */
function faultDetails(run: JudgedRun, fault: string): string[] {
  return (run.events ?? []).flatMap((e) => (e.kind === 'fault' && e.fault === fault && e.phase === 'start' ? [e.detail ?? ''] : []));
}
