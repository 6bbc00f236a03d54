import type { Etcd3 } from 'etcd3';
import { etcdUnavailable } from './etcd-errors.js';
import { withinBudget } from './etcd-budget.js';

/** What operators read of an etcd cluster (`fenced status`, `fenced doctor`). */
export interface EtcdClusterInfo {
  readonly members: ReadonlyArray<{ readonly id: string; readonly name: string; readonly clientUrls: readonly string[]; readonly learner: boolean }>;
  /** The member that answered, and what it knows. */
  readonly answeredBy: string;
  /** The leader's member id; '0' while the cluster has none. */
  readonly leader: string;
  readonly raftTerm: bigint;
  readonly revision: bigint;
  readonly version: string;
  /**
   * The shortest TTL etcd grants, in seconds: it raises any shorter one to 1.5 times its election
   * timeout (learned by asking for a 1 s lease, revoked at once).
   */
  readonly minLeaseTtlSec: number;
}

/** Asks the cluster, through whichever member the client reaches, what operators need to know. */
export async function etcdClusterInfo(client: Etcd3, timeoutMs: number): Promise<EtcdClusterInfo> {
  try {
    const [list, status, probe] = await Promise.all([
      withinBudget('memberList', timeoutMs, (o) => client.cluster.memberList({}, o)),
      withinBudget('status', timeoutMs, (o) => client.maintenance.status(o)),
      withinBudget('leaseGrant', timeoutMs, (o) => client.leaseClient.leaseGrant({ TTL: 1, ID: 0 }, o)),
    ]);
    void withinBudget('leaseRevoke', timeoutMs, (o) => client.leaseClient.leaseRevoke({ ID: probe.ID }, o)).catch(() => undefined);
    return {
      members: list.members.map((m) => ({ id: String(m.ID), name: m.name, clientUrls: m.clientURLs, learner: m.isLearner === true })),
      answeredBy: String(status.header.member_id),
      leader: String(status.leader),
      raftTerm: BigInt(status.raftTerm),
      revision: BigInt(status.header.revision),
      version: status.version,
      minLeaseTtlSec: Number(probe.TTL),
    };
  } catch (error) {
    throw etcdUnavailable('cluster status', error);
  }
}

/** A state of the cluster that makes leases unsafe or unavailable, or null. */
export async function etcdClusterProblem(client: Etcd3, timeoutMs: number): Promise<string | null> {
  const info = await etcdClusterInfo(client, timeoutMs);
  if (info.leader === '0') return 'the etcd cluster has no leader (no quorum): no lease can be granted or renewed';
  if (info.members.filter((m) => !m.learner).length % 2 === 0) return `the etcd cluster has ${info.members.length} voting members: an even count tolerates no more failures than one fewer`;
  return null;
}
