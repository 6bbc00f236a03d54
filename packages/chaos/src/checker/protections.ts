import type { Effect, HistoryEvent } from '../history.js';
import type { CheckInput } from './check-types.js';
import { firstFailedWrites } from './layer-invariants.js';

/**
 * The protections a run's history shows at work, each declared once: how it is counted, the column
 * of the results table it shows in (if any), and what that column means. A scenario lists the ones
 * its guarded run must show (`Scenario.exercises`), or the run is toothless.
 */
export const PROTECTIONS = {
  'stale refused': {
    column: 'stale refused',
    meaning: 'write attempts the guard refused as stale: the protection at work (0 in a control)',
    count: ({ history }) => writes(history).filter((w) => w.outcome === 'stale').length,
  },
  'duplicate dropped': {
    column: 'dups dropped',
    meaning: 'deliveries of a fire that had already taken effect, dropped by the dedupe (0 in a control)',
    count: ({ history }) => writes(history).filter((w) => w.outcome === 'duplicate').length,
  },
  'token repaired': {
    column: 'repaired',
    meaning: 'elections that found their token at or below a fence and raised the counter past it (0 in a control)',
    count: ({ history }) => history.filter((e) => e.kind === 'repair').length,
  },
  'write retried': {
    column: 'retried',
    meaning: 'fires whose write failed with the guard unreachable (nothing applied) and took effect on a later delivery (a failed control write is not retried)',
    count: ({ history }, byCommit) => {
      const applied = new Set(byCommit.map((e) => e.fireId));
      return [...firstFailedWrites(history).keys()].filter((id) => applied.has(id)).length;
    },
  },
  'aimed fault landed': {
    column: undefined,
    meaning: 'failpoint hits (a replica stopped or stalled there): the faults that landed exactly where they were aimed',
    count: ({ history }) => history.filter((e) => e.kind === 'failpoint').length,
  },
  'deposed primary refused': {
    column: 'deposed',
    meaning: 'grants and renewals the lease store refused because its primary confirmation did not count the server that gave them: a deposed PostgreSQL primary (a member is the primary on a later timeline), or a Redis server the sentinels do not all name (0 in a control)',
    count: ({ history }) => history.filter((e) => e.kind === 'deposed').length,
  },
  takeover: {
    column: undefined,
    meaning: "deposed leaders' transactions ended by an election-time advance they blocked",
    count: ({ history }) => history.filter((e) => e.kind === 'takeover' && e.ended).length,
  },
} as const satisfies Record<string, ProtectionEntry>;

export interface ProtectionEntry {
  /** Its column in the results table; undefined: counted (for the verdict) but not shown. */
  readonly column: string | undefined;
  readonly meaning: string;
  count(input: CheckInput, byCommit: readonly Effect[]): number;
}

/** A protection the history shows at work. */
export type Protection = keyof typeof PROTECTIONS;

/**
 * What a scenario requires a guarded run to show: a protection, or a list of them of which at least
 * one must be seen (the same fault is stopped by different protections in different apps: a lagging
 * leader's re-dispatched fire is dropped as a duplicate by one app, refused as stale by another whose
 * queue already dedupes the dispatch).
 */
export type Exercise = Protection | readonly [Protection, ...Protection[]];

const writes = (history: readonly HistoryEvent[]) => history.filter((e): e is Extract<HistoryEvent, { kind: 'write' }> => e.kind === 'write');
