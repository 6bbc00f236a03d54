import clusterKeySlot from 'cluster-key-slot';
import { leaseKeys } from '@fenced/coordinator';
import { createRedisGuard } from '@fenced/consumer-guard/redis';
import type { RedisTarget } from '../connections.js';
import type { LeaseStatus } from '../status/status-types.js';
import { fail, pass, skip, warn, type CheckResult } from './check.js';

/** On Cluster, a script's keys must share a slot: every key of a lease, and of a guard's resource. */
export async function clusterSlotsCheck(target: RedisTarget, keyPrefix: string, leases: readonly string[], resources: readonly string[]): Promise<CheckResult> {
  const id = 'redis.cluster-slots';
  if (target.kind !== 'cluster') return skip(id, 'not a Redis Cluster.');
  const state = /cluster_state:(\w+)/.exec(String(await target.client.cluster('INFO')))?.[1];
  const split: string[] = [];
  for (const lease of leases) {
    const keys = leaseKeys(keyPrefix, lease);
    const slots = new Set([keys.lease, keys.counter, keys.released, keys.fires, keys.elections].map((k) => clusterKeySlot(k)));
    if (slots.size !== 1) split.push(`lease ${lease} spans slots ${[...slots].join(', ')}`);
  }
  for (const resource of resources) {
    const guard = createRedisGuard({ redis: target.client, resource, keyPrefix });
    const slots = new Set([guard.markKey, guard.refusalsKey, guard.key('example')].map((k) => clusterKeySlot(k)));
    if (slots.size !== 1) split.push(`resource ${resource} spans slots ${[...slots].join(', ')}`);
  }
  if (state !== 'ok') return fail(id, `cluster_state is ${state ?? 'unknown'}: some slots are not served.`, 'Repair the cluster (redis-cli --cluster check / fix) before running leases on it.');
  if (split.length > 0) return fail(id, split.join('; '), 'Keys must be built by fenced (leaseKeys, guard.key(name)); a key prefix must not contain braces.');
  return pass(id, `cluster_state ok; the keys of ${leases.length} lease(s) and ${resources.length} resource(s) each share one slot (their hash tag), so every script runs on one primary.`);
}

/** A coordinator without a fence cannot repair a counter that went back: one token can be minted twice. */
export function fencesCheck(leases: readonly LeaseStatus[]): CheckResult {
  const id = 'lease.fences';
  if (leases.length === 0) return skip(id, 'no lease found under this prefix.');
  const unfenced = leases.filter((l) => l.elections[0] !== undefined && l.elections[0].fences === 0).map((l) => `${l.lease} (elected ${l.elections[0]!.node})`);
  const unknown = leases.filter((l) => l.elections[0] === undefined).map((l) => l.lease);
  if (unfenced.length > 0) {
    return fail(
      id,
      `the last election of ${unfenced.join(', ')} advanced no fence. If Redis loses the counter (a restart without persistence, a failover that missed the last INCR), the next election can mint a token already used, and nothing refuses the older leader's writes with the same token.`,
      'Pass the guard to the coordinator: createCoordinator({ …, fences: [guard] }) (a lease group: fences: (lease) => [guard.fence(lease)]).',
    );
  }
  if (unknown.length > 0) return warn(id, `no election recorded for ${unknown.join(', ')} (elected by a fenced version that did not record elections, or the record was lost).`, 'Nothing to do if the coordinators run this version: the next election records it.');
  return pass(id, `every lease's last election advanced at least one fence (${leases.map((l) => `${l.lease}: ${l.elections[0]!.fences}`).join(', ')}).`);
}

/**
 * The lease TTL against the failover gap the scheduler last measured: with a healthy deployment a
 * new term dispatches within about a TTL plus an acquire retry of the previous one's last dispatch.
 */
export function failoverCheck(leases: readonly LeaseStatus[], redisFailoverMs: number | null): CheckResult {
  const id = 'lease.failover';
  const measured = leases.filter((l) => l.failoverGapMs !== null && l.elections[0] !== undefined);
  if (measured.length === 0) return skip(id, 'no failover measured yet (a scheduler records the gap at the first dispatch of a new term).');
  const slow = measured.filter((l) => l.failoverGapMs! > 2 * l.elections[0]!.ttlMs + 1000);
  const lines = measured.map((l) => `${l.lease}: TTL ${l.elections[0]!.ttlMs} ms, last failover gap ${l.failoverGapMs} ms`);
  const outlasts = redisFailoverMs === null ? [] : measured.filter((l) => redisFailoverMs > l.elections[0]!.ttlMs).map((l) => l.lease);
  if (slow.length > 0) {
    return warn(
      id,
      `${lines.join('; ')}. A failover took more than twice the TTL for ${slow.map((l) => l.lease).join(', ')}: elections are slow to follow an expiry (acquireRetryMs, fences that answer slowly), or no replica was running.`,
      'Check acquireRetryMs (defaults to renewIntervalMs) and the fences\' latency at election; keep a standby replica running.',
    );
  }
  if (outlasts.length > 0) {
    return warn(id, `${lines.join('; ')}. A Redis failover (${redisFailoverMs} ms to detect) outlasts the TTL of ${outlasts.join(', ')}: each one costs a term.`, 'Raise the TTL above the deployment\'s failover detection time, or lower that time.');
  }
  return pass(id, `${lines.join('; ')}.`);
}
