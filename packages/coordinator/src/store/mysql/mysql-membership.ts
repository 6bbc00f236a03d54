import type { GroupMembership } from '../lease-backend.js';
import type { MysqlLeaseObjectNames } from './mysql-lease-names.js';
import { queryRows, type MysqlLeasePool } from './mysql-pool.js';

/** A lease group's members as rows with an expiry by the server's clock (migrations/000001.sql). */
export function mysqlMembership(pool: MysqlLeasePool, names: MysqlLeaseObjectNames, group: string): GroupMembership {
  return {
    async beat(member, ttlMs, timeoutMs) {
      const rows = await queryRows(pool, names.installation, `CALL ${names.beatProc}(?, ?, ?)`, [group, member, ttlMs], timeoutMs, 'heartbeat');
      let nextExpiryMs = -1;
      for (const row of rows) {
        if (row['member'] === member) continue;
        const left = Math.ceil(Number(row['left_us']) / 1000);
        if (nextExpiryMs < 0 || left < nextExpiryMs) nextExpiryMs = left;
      }
      return { members: rows.map((row) => String(row['member'])), nextExpiryMs };
    },
    async leave(member, timeoutMs) {
      await queryRows(pool, names.installation, `DELETE FROM ${names.members} WHERE grp = ? AND member = ?`, [group, member], timeoutMs, 'leave');
    },
  };
}
