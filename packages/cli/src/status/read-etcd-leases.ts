import { inspectEtcdLeases } from '@fenced/coordinator/etcd';
import type { Etcd3 } from 'etcd3';
import { jobsOfRecord, type LeaseStatus } from './status-types.js';

/**
 * The leases of an etcd lease store (`etcdLeases`), read at one revision of the cluster: holder,
 * token, time left (etcd counts whole seconds), the record of fires and the last elections. etcd has
 * no clock to read: `now` is this host's.
 */
export async function readEtcdLeases(client: Etcd3, prefix: string, only: readonly string[] | undefined, history: number): Promise<{ now: number; leases: LeaseStatus[] }> {
  const inspected = await inspectEtcdLeases(client, { prefix, history, ...(only === undefined ? {} : { only }) });
  return {
    now: Date.now(),
    leases: inspected.map((l) => ({
      lease: l.lease,
      leader: l.holder === null ? null : { node: l.holder.nodeId, token: l.holder.token },
      timeLeftMs: l.timeLeftMs,
      counter: l.holder?.token ?? l.elections[0]?.token ?? null,
      jobs: jobsOfRecord(l.fires),
      failoverGapMs: l.fires[':failover-gap'] === undefined ? null : Number(l.fires[':failover-gap']),
      elections: l.elections.map((e) => ({ at: new Date(e.at).toISOString(), token: e.token, node: e.nodeId, ttlMs: e.ttlMs, fences: e.fences, regressed: e.regressed })),
    })),
  };
}
