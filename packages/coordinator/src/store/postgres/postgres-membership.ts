import type { GroupMembership } from '../lease-backend.js';
import type { LeaseObjectNames } from './lease-names.js';
import { queryRows, type PgLeasePool } from './pg-pool.js';

/** A lease group's members as rows with an expiry by the server's clock (migrations/000001.sql). */
export function postgresMembership(pool: PgLeasePool, names: LeaseObjectNames, group: string): GroupMembership {
  return {
    async beat(member, ttlMs, timeoutMs) {
      const [row] = await queryRows<{ members: string[] | null; next_expiry_ms: string }>(
        pool,
        names.installation,
        `SELECT members, next_expiry_ms::text FROM ${names.beatFn}($1, $2, $3)`,
        [group, member, ttlMs],
        timeoutMs,
        'heartbeat',
      );
      return { members: row?.members ?? [], nextExpiryMs: Number(row?.next_expiry_ms ?? -1) };
    },
    async leave(member, timeoutMs) {
      await queryRows(pool, names.installation, `DELETE FROM ${names.members} WHERE grp = $1 AND member = $2`, [group, member], timeoutMs, 'leave');
    },
  };
}
