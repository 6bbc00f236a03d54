import type { HistoryEvent } from '../history.js';
import type { Invariant } from './check-types.js';

// Trace conformance: each write step a run's history shows must be one the protocol's model
// (model/fencing.pml, checked by SPIN) allows, given the grants the history shows. The invariants
// beside this one judge the promise's outcomes (nothing stale applied, nothing twice, nothing lost);
// this one judges the steps, the way etcd checks its raft traces against the TLA+ specification.
// Lines of different replicas reach the supervisor in no exact order, so a step is judged against
// what the whole run shows, not against what came before it by the supervisor's stamps; within one
// replica's lines and within the commit order, the order is exact and is used.

const FIRST = 5;

type Write = Extract<HistoryEvent, { kind: 'write' }>;

/**
 * The model's write step, in four rules:
 * - a write carries a token some grant minted (the model's node writes with `belief[me]`, set only
 *   by a grant): a committed effect, or a write attempt, with a token no replica was ever elected
 *   with is not a step of the protocol (a handler that made up its token, a token parsed wrong);
 * - a write refused as stale had a higher token above it (`t < fence`): some replica was elected
 *   with a higher token, or a higher token committed. A refusal with nothing above it is a guard
 *   refusing what the model lets through;
 * - a write refused as a duplicate names a fire that took effect (`claimed[f]`: the claim is made
 *   only with the fire's effect, in one transaction). A duplicate refusal of a fire that never took
 *   effect is a claim without its effect;
 * - a token commits writes for one term only (P3): when a token was granted more than once (a lossy
 *   failover minted it again), the writes committed with it by the replicas it was granted to come
 *   from one of them. (A queue's worker writes with its leader's token; writes by a replica the token
 *   was never granted to are judged by the first rule alone.)
 */
export const conformsToModel: Invariant = (input, byCommit) => {
  const grantedTo = new Map<string, Set<string>>();
  let highestGranted: bigint | undefined;
  for (const e of input.history) {
    if (e.kind !== 'belief' || !e.leader || e.token === undefined) continue;
    const nodes = grantedTo.get(e.token) ?? new Set<string>();
    nodes.add(e.node);
    grantedTo.set(e.token, nodes);
    const token = BigInt(e.token);
    if (highestGranted === undefined || token > highestGranted) highestGranted = token;
  }
  const highestCommitted = byCommit.reduce<bigint | undefined>((top, e) => (top === undefined || e.token > top ? e.token : top), undefined);
  const applied = new Set(byCommit.map((e) => e.fireId));
  const violations: string[] = [];
  let count = 0;
  const broken = (line: string) => {
    count++;
    if (violations.length < FIRST) violations.push(`not a step of the model: ${line}`);
  };

  for (const effect of byCommit) {
    if (!grantedTo.has(effect.token.toString())) broken(`${effect.fireId} committed by ${effect.node} with token ${effect.token}, which no election granted`);
  }
  const writes = input.history.filter((e): e is Write => e.kind === 'write');
  for (const w of writes) {
    if (!grantedTo.has(w.token)) {
      broken(`a write of ${w.fireId} by ${w.node} (${w.outcome}) with token ${w.token}, which no election granted`);
      continue;
    }
    const token = BigInt(w.token);
    if (w.outcome === 'stale' && !(highestGranted! > token) && !(highestCommitted !== undefined && highestCommitted > token)) {
      broken(`${w.fireId} by ${w.node} refused as stale with token ${w.token}, the highest token granted or committed in the run`);
    }
    if (w.outcome === 'duplicate' && !applied.has(w.fireId)) broken(`${w.fireId} by ${w.node} refused as a duplicate, but it never took effect`);
  }

  for (const [token, nodes] of grantedTo) {
    if (nodes.size < 2) continue;
    const writers = new Set(byCommit.filter((e) => e.token.toString() === token && nodes.has(e.node)).map((e) => e.node));
    if (writers.size > 1) broken(`token ${token}, granted to ${[...nodes].sort().join(' and ')}, committed writes for ${[...writers].sort().join(' and ')}: two terms`);
  }
  return { count, violations, marks: [] };
};
