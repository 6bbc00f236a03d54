import { EtcdLeaseInvalidError, type Etcd3 } from 'etcd3';
import type { GroupMembership } from '../lease-backend.js';
import type { EtcdKeys } from './etcd-keys.js';
import { etcdUnavailable } from './etcd-errors.js';
import { withinBudget } from './etcd-budget.js';
import type { EtcdSessions } from './etcd-sessions.js';

/**
 * A lease group's members as keys attached to each member process's etcd lease (the one its won
 * leases share): a member that dies leaves the list when its etcd lease expires, with its leases.
 */
export function etcdMembership(client: Etcd3, keys: EtcdKeys, sessions: EtcdSessions, group: string): GroupMembership {
  const range = keys.group(group);
  return {
    async beat(member, ttlMs, timeoutMs) {
      for (let attempt = 1; ; attempt++) {
        const session = await sessions.session(ttlMs, timeoutMs);
        const key = range.member(member);
        try {
          // The keep-alive and, in one transaction, the member key put on the session unless it is
          // there already, then the list read after it.
          const [alive, reply] = await Promise.all([
            sessions.keepAlive(session, timeoutMs),
            withinBudget('txn', timeoutMs, (o) =>
              client.kv.txn(
                {
                  compare: [{ key, target: 'Lease', result: 'Equal', lease: session.id }],
                  success: [{ request_range: { key: range.start, range_end: range.end } }],
                  failure: [{ request_put: { key, value: Buffer.from(member), lease: session.id } }, { request_range: { key: range.start, range_end: range.end } }],
                },
                o,
              ),
            ),
          ]);
          if (!alive && attempt < 3) continue;
          const kvs = reply.responses[reply.responses.length - 1]!.response_range.kvs;
          const others = kvs.filter((kv) => String(kv.lease) !== session.id);
          const ttls = await Promise.all(
            [...new Set(others.map((kv) => String(kv.lease)))].map((id) =>
              withinBudget('leaseTimeToLive', timeoutMs, (o) => client.leaseClient.leaseTimeToLive({ ID: id, keys: false }, o)).then(
                (r) => Math.max(Number(r.TTL), 0) * 1000,
                () => 0,
              ),
            ),
          );
          return { members: kvs.map((kv) => range.memberOf(kv.key)).sort(), nextExpiryMs: ttls.length === 0 ? -1 : Math.max(100, Math.min(...ttls)) };
        } catch (error) {
          if (attempt < 3 && error instanceof EtcdLeaseInvalidError) {
            sessions.drop(session);
            continue;
          }
          throw etcdUnavailable('heartbeat', error);
        }
      }
    },
    async leave(member, timeoutMs) {
      await withinBudget('deleteRange', timeoutMs, (o) => client.kv.deleteRange({ key: range.member(member) }, o)).catch((error: unknown) => {
        throw etcdUnavailable('leave', error);
      });
    },
  };
}
