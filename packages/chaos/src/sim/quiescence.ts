import { leadershipIntervals } from '../checker/check-run.js';
import type { HistoryEvent } from '../history.js';

/**
 * Whether a run has settled after its faults were healed, so that what took effect can be judged:
 * - exactly one replica believes it leads (a deposed one that still believes could yet act);
 * - the schedule has caught up past the checked window: some replica dispatched a fire due after it
 *   (fires go out in due order, so every fire of the window went out before);
 * - every write a running replica began has its outcome (a write begun by an incarnation that was
 *   killed never will, and is not waited for).
 *
 * `afterWindow` holds the ids of fires due after the window.
 */
export function hasSettled(events: readonly HistoryEvent[], afterWindow: ReadonlySet<string>): boolean {
  const open = new Map<string, Set<string>>();
  let caughtUp = false;
  for (const e of events) {
    if (e.kind === 'process' && (e.event === 'started' || e.event === 'exited')) {
      // A new incarnation: what the old one had open is abandoned.
      open.set(e.node, new Set());
    } else if (e.kind === 'dispatch') {
      if (afterWindow.has(e.fireId)) caughtUp = true;
    } else if (e.kind === 'write') {
      const writes = open.get(e.node) ?? new Set<string>();
      open.set(e.node, writes);
      if (e.outcome === 'begin') writes.add(e.fireId);
      else writes.delete(e.fireId);
    }
  }
  // Believers now: leadership epochs still open (an exit ends one, as a lost belief does).
  const leaders = leadershipIntervals(events, Number.POSITIVE_INFINITY).filter((epoch) => epoch.end === Number.POSITIVE_INFINITY).length;
  const inFlight = [...open.values()].reduce((n, writes) => n + writes.size, 0);
  return leaders === 1 && caughtUp && inFlight === 0;
}
