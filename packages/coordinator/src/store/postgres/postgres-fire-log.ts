import { FireRecordBatcher } from '../fire-record-batcher.js';
import type { FireLog } from '../fire-log.js';
import type { LeaseObjectNames } from './lease-names.js';
import { queryRows, type PgLeasePool } from './pg-pool.js';
import { parseLeaseValue } from '../lease-value.js';

/**
 * The fire log in a table beside the lease rows, its records batched per turn of the event loop into
 * one call of the record function (migrations/000001.sql), which checks the lease under a share lock
 * on its row in the same transaction: a deposed leader records nothing.
 */
export function postgresFireLog(pool: PgLeasePool, names: LeaseObjectNames, lease: string, timeoutMs: number): FireLog {
  const batcher = new FireRecordBatcher(async (leaseValue, records, gapMs) => {
    const owner = parseLeaseValue(leaseValue);
    if (owner === null) return 0;
    const [row] = await queryRows<{ recorded: number }>(
      pool,
      names.installation,
      `SELECT ${names.recordFiresFn}($1, $2, $3, $4, $5::text[], $6::bigint[], $7::bigint[]) AS recorded`,
      [
        lease,
        owner.token.toString(),
        owner.nodeId,
        gapMs === null ? null : Math.round(gapMs),
        records.map((r) => r.job),
        records.map((r) => String(Math.floor(r.scheduledAt))),
        records.map((r) => (r.dispatchedAt == null ? null : String(Math.floor(r.dispatchedAt)))),
      ],
      timeoutMs,
      'record fires',
    );
    return Number(row?.recorded ?? 0);
  });
  return {
    async load() {
      const rows = await queryRows<{ field: string; value: string }>(pool, names.installation, `SELECT field, value::text FROM ${names.fires} WHERE lease = $1`, [lease], timeoutMs, 'load fires');
      return Object.fromEntries(rows.map((r) => [r.field, r.value]));
    },
    record: (leaseValue, record, failoverGapMs) => batcher.record(leaseValue, record, failoverGapMs),
  };
}
