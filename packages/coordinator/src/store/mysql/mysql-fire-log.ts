import { FireRecordBatcher } from '../fire-record-batcher.js';
import type { FireLog } from '../fire-log.js';
import { parseLeaseValue } from '../lease-value.js';
import type { MysqlLeaseObjectNames } from './mysql-lease-names.js';
import { queryRows, type MysqlLeasePool } from './mysql-pool.js';

/**
 * The fire log in a table beside the lease rows, its records batched per turn of the event loop into
 * one call of the record procedure (migrations/000001.sql), which checks the lease under a share lock
 * on its row in the same transaction: a deposed leader records nothing.
 */
export function mysqlFireLog(pool: MysqlLeasePool, names: MysqlLeaseObjectNames, lease: string, timeoutMs: number): FireLog {
  const batcher = new FireRecordBatcher(async (leaseValue, records, gapMs) => {
    const owner = parseLeaseValue(leaseValue);
    if (owner === null) return 0;
    const fires = JSON.stringify(records.map((r) => [r.job, Math.floor(r.scheduledAt), r.dispatchedAt == null ? null : Math.floor(r.dispatchedAt)]));
    const [row] = await queryRows(
      pool,
      names.installation,
      `CALL ${names.recordFiresProc}(?, ?, ?, ?, ?)`,
      [lease, owner.token.toString(), owner.nodeId, gapMs === null ? null : Math.round(gapMs), fires],
      timeoutMs,
      'record fires',
    );
    return Number(row?.['recorded'] ?? 0);
  });
  return {
    async load() {
      const rows = await queryRows(
        pool,
        names.installation,
        `SELECT CAST(field AS CHAR CHARACTER SET utf8mb4) AS field, CAST(value AS CHAR) AS value FROM ${names.fires} WHERE lease = ?`,
        [lease],
        timeoutMs,
        'load fires',
      );
      return Object.fromEntries(rows.map((r) => [String(r['field']), String(r['value'])]));
    },
    record: (leaseValue, record, failoverGapMs) => batcher.record(leaseValue, record, failoverGapMs),
  };
}
