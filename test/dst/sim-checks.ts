/**
 * The deterministic simulation judged by the checkers `pnpm sim` uses (@fenced/chaos's invariants),
 * not by copies of them: a schedule's ledger and the nodes' events become the history and effects
 * a real-process run would have recorded, and each invariant below judges them as it judges a run.
 *
 * The invariants that need real time are left to `pnpm sim`: starvation, recovery bounds counted in
 * wall-clock time, a crashed process. The overlap of beliefs is judged by the schedule itself
 * (schedule.ts), which knows what the in-memory store lost and when a clock ran slow.
 */
import { INVARIANTS, type CheckInput, type Effect, type HistoryEvent, type WriteOutcome } from '@fenced/chaos';
import type { FencedEvent } from '@fenced/shared';

/** One row of the ledger the nodes' handler writes, in commit order. */
export interface LedgerRow {
  readonly fire: string;
  readonly token: bigint;
  readonly node: string;
  /** When the fire was due, epoch ms (virtual): the envelope's `scheduledAt`. */
  readonly scheduledAt: number;
  /** When the row was written inside its guarded transaction, epoch ms (virtual). */
  readonly committedAt: number;
}

/** What a node's wrapped handler came to, as the simulation's replicas report it. */
export type WriteRecord = { readonly at: number; readonly node: string; readonly fireId: string; readonly token: bigint; readonly outcome: WriteOutcome };

/** What one node logged, with the virtual time it logged it. */
export interface NodeEvent {
  readonly at: number;
  readonly event: FencedEvent;
}

/** A node incarnation that ended without a word (a crash), for the history's `exited`. */
export interface Exit {
  readonly at: number;
  readonly node: string;
}

/** The invariants of `pnpm sim` that judge a schedule, by their names in INVARIANTS. */
export const SHARED_INVARIANTS = ['staleApplied', 'duplicates', 'missed', 'early', 'electionOrder', 'dispatchWhileLeading', 'model'] as const satisfies ReadonlyArray<keyof typeof INVARIANTS>;

/** The history a real-process run would have recorded of this schedule, in time order. */
export function historyOf(events: readonly NodeEvent[], writes: readonly WriteRecord[], exits: readonly Exit[]): HistoryEvent[] {
  const history: HistoryEvent[] = [];
  for (const { at, event } of events) {
    if (event.type === 'lease.acquired') history.push({ at, kind: 'belief', node: event.nodeId, leader: true, token: event.token.toString() });
    else if (event.type === 'lease.lost' || event.type === 'lease.released') history.push({ at, kind: 'belief', node: event.nodeId, leader: false, reason: event.type === 'lease.lost' ? event.reason : 'released' });
    else if (event.type === 'fire.dispatched') history.push({ at, kind: 'dispatch', node: event.nodeId, fireId: event.fireId, token: event.token.toString() });
  }
  for (const w of writes) history.push({ at: w.at, kind: 'write', node: w.node, fireId: w.fireId, token: w.token.toString(), outcome: w.outcome });
  for (const e of exits) history.push({ at: e.at, kind: 'process', node: e.node, event: 'exited' });
  // Stable: events of one moment keep the order they were recorded in, per kind.
  return history.sort((a, b) => a.at - b.at);
}

/** The ledger's rows as the effects `pnpm sim` reads from its database. */
export function effectsOf(ledger: readonly LedgerRow[]): Effect[] {
  return ledger.map((row, i) => ({ resource: 'ledger', fireId: row.fire, token: row.token, node: row.node, commitSeq: i + 1, scheduledAt: row.scheduledAt, committedAt: row.committedAt }));
}

/** Each break the shared invariants find, one line each, named by its invariant. */
export function sharedInvariantFailures(input: CheckInput): string[] {
  const byCommit = [...input.effects].sort((a, b) => a.commitSeq - b.commitSeq);
  return SHARED_INVARIANTS.flatMap((name) => {
    const result = INVARIANTS[name].check(input, byCommit);
    // Every break, not only the few lines an invariant keeps: a count beyond its lines is said.
    const lines = result.violations.map((v) => `${name}: ${v}`);
    return result.count > result.violations.length ? [...lines, `${name}: ${result.count - result.violations.length} more`] : lines;
  });
}
