import type { HistoryEvent } from '../history.js';
import type { Invariant } from './check-types.js';

const FIRST = 5;

type Belief = Extract<HistoryEvent, { kind: 'belief' }>;

/**
 * The lease's promise, from the replicas' own reports: every election hands out a token higher than
 * any elected before it. A token that repeats or goes down (a counter that went back with a lossy
 * failover or a Redis restart, and was not repaired) breaks it, even when the fences keep the
 * effects right.
 */
export const electionsInTokenOrder: Invariant = (input) => {
  let highest: Belief | undefined;
  const violations: string[] = [];
  let count = 0;
  for (const e of input.history) {
    if (e.kind !== 'belief' || !e.leader || e.token === undefined) continue;
    if (highest !== undefined && BigInt(e.token) <= BigInt(highest.token!)) {
      count++;
      if (violations.length < FIRST) violations.push(`election out of token order: ${e.node} elected with token ${e.token} after ${highest.node} was elected with ${highest.token}`);
    }
    if (highest === undefined || BigInt(e.token) > BigInt(highest.token!)) highest = e;
  }
  return { count, violations, marks: [] };
};

/**
 * Only a leader dispatches, and with the token it was elected with: a replica dispatches while its
 * latest report says it leads (a restarted process leads only once it says so again).
 */
export const dispatchOnlyWhileLeading: Invariant = (input) => {
  const belief = new Map<string, Belief | undefined>();
  const violations: string[] = [];
  let count = 0;
  for (const e of input.history) {
    if (e.kind === 'belief') belief.set(e.node, e.leader ? e : undefined);
    else if (e.kind === 'process' && (e.event === 'started' || e.event === 'exited')) belief.set(e.node, undefined);
    else if (e.kind === 'dispatch') {
      const leading = belief.get(e.node);
      if (leading === undefined || leading.token !== e.token) {
        count++;
        if (violations.length < FIRST) {
          violations.push(`dispatch by a replica that did not lead: ${e.node} dispatched ${e.fireId} with token ${e.token}${leading === undefined ? ' while not leading' : ` while leading with ${leading.token}`}`);
        }
      }
    }
  }
  return { count, violations, marks: [] };
};
