import type { Etcd3, IRequestOp } from 'etcd3';
import { FireRecordBatcher } from '../fire-record-batcher.js';
import type { FireLog, FireRecord } from '../fire-log.js';
import type { EtcdKeys } from './etcd-keys.js';
import { isTermOf, readHolder } from './etcd-holder.js';
import { stillHeld } from './etcd-lease-store.js';
import { etcdUnavailable } from './etcd-errors.js';
import { withinBudget } from './etcd-budget.js';
import { parseLeaseValue } from '../lease-value.js';

/** etcd refuses a transaction of more than 128 operations (its `--max-txn-ops`): a batch is one transaction. */
const MAX_BATCH = 100;
/** Fire times are stored zero-padded, so that etcd's byte-wise compare orders them as numbers. */
const TIME_DIGITS = 16;
const padded = (ms: number) => String(Math.floor(ms)).padStart(TIME_DIGITS, '0');

/**
 * The scheduler's record in etcd, beside the lease it is checked against: each batch is one
 * transaction that applies only while the lease key is still this term's (same create_revision,
 * same value), so a deposed leader records nothing. Each job keeps its latest fire: a nested
 * transaction per job writes only a later time than the one stored.
 *
 * Why etcd and not the fence database: the record must be checked against the lease in the store
 * that holds the lease, in the same transaction, as on Redis and PostgreSQL. Anywhere else the check
 * and the write are two requests, with a takeover possible between them.
 */
export function etcdFireLog(client: Etcd3, keys: EtcdKeys, lease: string, timeoutMs: number): FireLog {
  const fires = keys.fires(lease);
  const leaseKey = keys.lease(lease);
  const batcher = new FireRecordBatcher(async (leaseValue, records, gapMs) => {
    const owner = parseLeaseValue(leaseValue);
    if (owner === null) return 0;
    try {
      const holder = await readHolder(client, leaseKey, timeoutMs);
      if (!isTermOf(holder, owner)) return 0;
      const ops: IRequestOp[] = latestPerJob(records).map(({ job, scheduledAt, dispatchedAt }) => {
        const key = fires.field(job);
        const puts: IRequestOp[] = [{ request_put: { key, value: Buffer.from(padded(scheduledAt)) } }];
        if (dispatchedAt !== null) puts.push({ request_put: { key: fires.field(`:dispatched:${job}`), value: Buffer.from(String(Math.floor(dispatchedAt))) } });
        // Absent, or holding an earlier fire: record this one. (A missing key fails any compare of its value.)
        const ifEarlier: IRequestOp = { request_txn: { compare: [{ key, target: 'Value', result: 'Less', value: Buffer.from(padded(scheduledAt)) }], success: puts } };
        return { request_txn: { compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }], success: puts, failure: [ifEarlier] } };
      });
      if (gapMs !== null) ops.push({ request_put: { key: fires.field(':failover-gap'), value: Buffer.from(String(Math.round(gapMs))) } });
      const reply = await withinBudget('txn', timeoutMs, (o) => client.kv.txn({ compare: stillHeld(leaseKey, holder), success: ops }, o));
      return reply.succeeded ? 1 : 0;
    } catch (error) {
      throw etcdUnavailable('record fires', error);
    }
  }, MAX_BATCH);
  return {
    async load() {
      const reply = await withinBudget('range', timeoutMs, (o) => client.kv.range({ key: fires.start, range_end: fires.end }, o)).catch((error: unknown) => {
        throw etcdUnavailable('load fires', error);
      });
      return Object.fromEntries(
        reply.kvs.map((kv) => {
          const field = fires.fieldOf(kv.key);
          const value = kv.value.toString();
          return [field, field.startsWith(':') ? value : BigInt(value).toString()];
        }),
      );
    },
    record: (leaseValue, record, failoverGapMs) => batcher.record(leaseValue, record, failoverGapMs),
  };
}

/**
 * Each job once, at the latest fire the batch holds for it (a transaction may not write a key
 * twice), with the dispatch time of the last dispatched fire that moved it forward, as if the
 * records had been made one after another.
 */
function latestPerJob(records: readonly FireRecord[]): Array<{ job: string; scheduledAt: number; dispatchedAt: number | null }> {
  const latest = new Map<string, { job: string; scheduledAt: number; dispatchedAt: number | null }>();
  for (const r of records) {
    const current = latest.get(r.job);
    if (current !== undefined && current.scheduledAt >= r.scheduledAt) continue;
    latest.set(r.job, { job: r.job, scheduledAt: r.scheduledAt, dispatchedAt: r.dispatchedAt ?? current?.dispatchedAt ?? null });
  }
  return [...latest.values()];
}
