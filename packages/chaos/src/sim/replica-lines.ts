import type { HistoryEvent } from '../history.js';
import type { ProcessLine } from '../process/managed-process.js';

/**
 * A replica's report, as the history records it: the one place a replica's output becomes a history
 * event. A replica (see `SimApp.replica`) prints one JSON object per line:
 * - `{ kind: 'belief', leader, token?, reason? }`: its belief about its leadership changed;
 * - `{ kind: 'dispatch', fireId, token, scheduledAt?, leading? }`: it dispatched a fire;
 * - `{ kind: 'handled', fireId }`: the handler of a fire it dispatched returned or threw;
 * - `{ kind: 'write', fireId, token, outcome, reason?, highestBefore? }`: a write attempt and its outcome;
 * - `{ kind: 'failpoint', name, action? }`: it stopped (or stalled) itself at a failpoint it was armed with;
 * - `{ kind: 'repair', token }`: an election repaired the token counter;
 * - `{ kind: 'takeover', ended }`: an election's advance ended a blocking transaction;
 * - `{ kind: 'deposed', operation, server? }`: its lease store refused a grant or renewal its primary
 *   confirmation did not count (a deposed primary; on Redis, a server the sentinels do not all name);
 * - `{ kind: 'starved', ms }`: its event loop ran `ms` late (`startStarvationProbe`).
 * Other lines (`ready`, `stalling`, text) are for the supervisor's own waits: no event.
 */
export function historyEventOf(name: string, line: ProcessLine): HistoryEvent | undefined {
  const r = line.record;
  const at = line.at;
  const token = r['token'] === undefined ? undefined : String(r['token']);
  switch (r['kind']) {
    case 'belief':
      return { at, kind: 'belief', node: name, leader: r['leader'] === true, ...(token ? { token } : {}), ...(r['reason'] ? { reason: String(r['reason']) } : {}) };
    case 'dispatch':
      return {
        at,
        kind: 'dispatch',
        node: name,
        fireId: String(r['fireId']),
        token: token ?? '',
        ...(typeof r['scheduledAt'] === 'number' ? { scheduledAt: r['scheduledAt'] } : {}),
        ...(typeof r['leading'] === 'boolean' ? { leading: r['leading'] } : {}),
      };
    case 'handled':
      return { at, kind: 'handled', node: name, fireId: String(r['fireId']) };
    case 'write':
      return {
        at,
        kind: 'write',
        node: name,
        fireId: String(r['fireId']),
        token: token ?? '',
        outcome: r['outcome'] as 'begin',
        ...(r['reason'] ? { reason: String(r['reason']) } : {}),
        ...(r['highestBefore'] === undefined ? {} : { highestBefore: String(r['highestBefore']) }),
      };
    case 'failpoint':
      return { at, kind: 'failpoint', node: name, name: String(r['name']), ...(r['action'] === undefined ? {} : { action: String(r['action']) }) };
    case 'repair':
      return { at, kind: 'repair', node: name, token: token ?? '' };
    case 'takeover':
      return { at, kind: 'takeover', node: name, ended: r['ended'] === true };
    case 'deposed':
      return { at, kind: 'deposed', node: name, operation: String(r['operation']), ...(typeof r['server'] === 'string' ? { server: r['server'] } : {}) };
    case 'starved':
      return typeof r['ms'] === 'number' && r['ms'] > 0 ? { at, kind: 'starved', node: name, ms: r['ms'] } : undefined;
    default:
      return undefined;
  }
}
