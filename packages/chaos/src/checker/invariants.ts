import type { Invariant } from './check-types.js';
import { noDuplicateEffect, noEarlyEffect, noMissedFire, noStaleEffect } from './effect-invariants.js';
import {
  dispatchWithinOwnTerm,
  dueFiresDispatchedInTime,
  failedWritesApplyLater,
  failoverWithinBound,
  markNotAheadOfFence,
  noEarlyDispatch,
  noHandlerForStaleToken,
  noHandlerWhileGuardUnreachable,
  noLongSilence,
  noReplicaCrashed,
  replicasStarted,
} from './layer-invariants.js';
import { dispatchOnlyWhileLeading, electionsInTokenOrder } from './lease-invariants.js';
import { conformsToModel } from './model-conformance.js';

export type { EffectMark, Invariant, InvariantResult } from './check-types.js';
export { noDuplicateEffect, noEarlyEffect, noMissedFire, noStaleEffect } from './effect-invariants.js';

/**
 * The columns of the results table that count breaks of the promise, in the table's order, each with
 * what it means (printed by `--help`, under the report's table, and in the docs). A guarded run is
 * clean when every invariant below counts 0.
 */
export const ANOMALY_COLUMNS = [
  { column: 'duplicates', meaning: 'effects beyond the first for one fire (a fire that took effect twice)' },
  { column: 'missed', meaning: 'fires due in the window that never took effect' },
  { column: 'stale applied', meaning: 'effects committed with a token lower than one already committed on the same resource' },
  { column: 'early', meaning: 'effects committed before their fire was due by the server clock' },
  { column: 'lease', meaning: "breaks of the lease's own promise, whatever the effects: an election whose token is not above every one elected before it, a dispatch by a replica that did not lead" },
  {
    column: 'scheduler',
    meaning: "breaks of the scheduler's promise: a dispatch after the replica's own lease ended, a dispatch before the fire was due by the server clock, a due fire not dispatched within the recovery bound (after it was due, or after the fault it came due in, plus the time the job was busy with earlier fires)",
  },
  { column: 'handler', meaning: 'handlers started for a token below what the guard already knew just before, or while PostgreSQL and Redis were both unreachable: the pre-check let a fire run its side effects unchecked' },
  { column: 'guard', meaning: "breaks of the guard's promise: stale effects applied, and a Redis mark left ahead of the fence PostgreSQL committed" },
  { column: 'dedupe', meaning: 'fires that took effect twice, and fires whose write failed and never took effect on a later delivery' },
  {
    column: 'liveness',
    meaning:
      'stretches outside the faults longer than the recovery bound with no dispatch by anyone; failovers after a leader froze inside its transaction slower than TTL + renew interval + 1 s; replica processes that died on their own (an unhandled error), in any scenario; a run whose replicas elected no leader, or dispatched nothing, within 30 s of starting',
  },
  {
    column: 'model',
    meaning:
      "write steps the protocol's model (model/fencing.pml) does not allow: a write or effect with a token no election granted, a stale refusal with no higher token granted or committed in the run, a duplicate refusal of a fire that never took effect, a token granted twice that committed writes for both replicas",
  },
] as const;

export type AnomalyColumn = (typeof ANOMALY_COLUMNS)[number]['column'];

/** One invariant of the promise and the columns its breaks count in (a layer's column, and the effects' own where the break shows in the data). */
export interface InvariantEntry {
  readonly check: Invariant;
  readonly columns: readonly [AnomalyColumn, ...AnomalyColumn[]];
}

/**
 * The promise, one invariant each: a run's anomalies are the sum of their counts (each break once,
 * whatever number of columns shows it), and each column sums the invariants that name it.
 */
export const INVARIANTS = {
  staleApplied: { check: noStaleEffect, columns: ['stale applied', 'guard'] },
  duplicates: { check: noDuplicateEffect, columns: ['duplicates', 'dedupe'] },
  missed: { check: noMissedFire, columns: ['missed'] },
  early: { check: noEarlyEffect, columns: ['early'] },
  electionOrder: { check: electionsInTokenOrder, columns: ['lease'] },
  dispatchWhileLeading: { check: dispatchOnlyWhileLeading, columns: ['lease'] },
  dispatchWithinOwnTerm: { check: dispatchWithinOwnTerm, columns: ['scheduler'] },
  earlyDispatch: { check: noEarlyDispatch, columns: ['scheduler'] },
  dueDispatched: { check: dueFiresDispatchedInTime, columns: ['scheduler'] },
  handlerForStale: { check: noHandlerForStaleToken, columns: ['handler'] },
  handlerUnguarded: { check: noHandlerWhileGuardUnreachable, columns: ['handler'] },
  markAhead: { check: markNotAheadOfFence, columns: ['guard'] },
  failedApplyLater: { check: failedWritesApplyLater, columns: ['dedupe'] },
  silence: { check: noLongSilence, columns: ['liveness'] },
  crashes: { check: noReplicaCrashed, columns: ['liveness'] },
  failover: { check: failoverWithinBound, columns: ['liveness'] },
  started: { check: replicasStarted, columns: ['liveness'] },
  model: { check: conformsToModel, columns: ['model'] },
} as const satisfies Record<string, InvariantEntry>;
