import { etcdClusterInfo, type EtcdClusterInfo } from '@fenced/coordinator/etcd';
import type { Etcd3 } from 'etcd3';
import type pg from 'pg';
import { fail, pass, skip, warn, type CheckResult } from './check.js';
import { etcdClient, type EtcdSecurity } from '../etcd-connection.js';

// The checks of an etcd lease store (`etcdLeases`): what its promise needs from the cluster.

/** Members, leader, quorum: a cluster without a leader grants and renews nothing. */
export function etcdClusterCheck(info: EtcdClusterInfo): CheckResult {
  const id = 'etcd.cluster';
  const voting = info.members.filter((m) => !m.learner);
  const names = info.members.map((m) => `${m.name || m.id}${m.id === info.leader ? ' (leader)' : ''}`).join(', ');
  if (info.leader === '0') return fail(id, `${voting.length} voting member(s) (${names}), no leader: no quorum, so no lease can be granted or renewed.`, 'Bring members back until a majority of the voting members runs.');
  if (voting.length % 2 === 0) return warn(id, `${voting.length} voting members (${names}), leader at raft term ${info.raftTerm}: an even count tolerates no more failures than one fewer.`, 'Run three or five voting members.');
  if (voting.length === 1) return warn(id, `one voting member (${names}): its loss stops every lease, and a lost disk can rewind it.`, 'Run three or five voting members.');
  return pass(id, `${voting.length} voting members (${names}), leader at raft term ${info.raftTerm}, revision ${info.revision}: tolerates ${Math.floor((voting.length - 1) / 2)} failure(s).`);
}

/** Each endpoint given, asked on its own: which answer, and who they follow. */
export async function etcdMembersCheck(endpoints: readonly string[], security: EtcdSecurity): Promise<CheckResult> {
  const id = 'etcd.members';
  const answers = await Promise.all(
    endpoints.map(async (endpoint) => {
      const client = await etcdClient([endpoint], security, 2000);
      try {
        const status = await client.maintenance.status({ deadline: Date.now() + 3000 });
        return { endpoint, ok: true as const, leader: String(status.leader), term: String(status.raftTerm) };
      } catch (error) {
        return { endpoint, ok: false as const, error: (error as Error).message };
      } finally {
        client.close();
      }
    }),
  );
  const down = answers.filter((a) => !a.ok);
  const detail = answers.map((a) => (a.ok ? `${a.endpoint}: up, raft term ${a.term}` : `${a.endpoint}: no answer`)).join('; ');
  if (down.length === answers.length) return fail(id, detail, 'Start the members, or fix --etcd/ETCD_ENDPOINTS.');
  if (down.length > 0) return warn(id, detail, 'Bring the silent members back: the cluster tolerates fewer failures while they are down.');
  return pass(id, detail);
}

/** etcd raises a TTL below its minimum (1.5 × its election timeout): a crashed leader's lease then outlives the TTL asked for. */
export function etcdTtlCheck(info: EtcdClusterInfo, ttlsMs: readonly number[]): CheckResult {
  const id = 'etcd.ttl';
  const minMs = info.minLeaseTtlSec * 1000;
  if (ttlsMs.length === 0) return skip(id, `no election recorded yet; etcd grants at least ${info.minLeaseTtlSec} s.`);
  const shortest = Math.min(...ttlsMs);
  if (shortest < minMs) {
    return warn(id, `a lease asks for ${shortest} ms but etcd grants at least ${minMs} ms (1.5 × its election timeout): a crashed leader's lease lasts ${minMs} ms, so failovers take that long (safe: never shorter).`, `Ask for a TTL of at least ${minMs} ms, or lower etcd's --election-timeout.`);
  }
  return pass(id, `the shortest TTL asked for (${shortest} ms) is at least the ${minMs} ms etcd grants at least (1.5 × its election timeout).`);
}

/**
 * etcd has no clock to read: due times come from the time source the application chose. This host's
 * clock against the fence database's says how far a `'local'` time source would be off here.
 */
export async function etcdClockCheck(pool: pg.Pool | null): Promise<CheckResult> {
  const id = 'etcd.clock';
  if (pool === null) return skip(id, 'no database given: the offset of this host’s clock from the fence database’s is not measured.');
  const before = Date.now();
  const ms = Number((await pool.query<{ ms: string }>(`SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS ms`)).rows[0]!.ms);
  const after = Date.now();
  // The reading lies somewhere in the round trip: the offset is known to within half of it.
  const offset = ms - (before + after) / 2;
  const text = `this host's clock is ${Math.round(Math.abs(offset))} ms ${offset > 0 ? 'behind' : 'ahead of'} the fence database's (± ${Math.ceil((after - before) / 2)} ms)`;
  if (Math.abs(offset) > 1000) return warn(id, `${text}: with clock 'local', fires here would be ${offset > 0 ? 'late' : 'early'} by that much.`, "Give etcdLeases clock: postgresClock(pool), or fix this host's NTP.");
  return pass(id, `${text}; with postgresClock(pool) every replica reads the database's.`);
}

export async function etcdChecks(client: Etcd3, endpoints: readonly string[], security: EtcdSecurity, pool: pg.Pool | null, ttlsMs: readonly number[]): Promise<CheckResult[]> {
  let info: EtcdClusterInfo;
  try {
    info = await etcdClusterInfo(client, 5000);
  } catch (error) {
    return [fail('etcd.cluster', `the cluster did not answer: ${(error as Error).message}`, 'Check the endpoints and that a majority of members runs.')];
  }
  return [etcdClusterCheck(info), await etcdMembersCheck(endpoints, security), etcdTtlCheck(info, ttlsMs), await etcdClockCheck(pool)];
}
