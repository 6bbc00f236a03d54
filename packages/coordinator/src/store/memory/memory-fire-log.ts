import type { FireLog, FireRecord } from '../fire-log.js';
import type { MemoryLeaseServer } from './memory-server.js';

/**
 * The fields one record sets, as record-fires-2.lua sets them on Redis: a job keeps its latest
 * scheduled fire (an equal or earlier one changes nothing), with `:dispatched:<job>` when the record
 * is a dispatch, not a baseline; the failover gap a term's first dispatch closed in `:failover-gap`.
 */
export function fieldsOf(current: ReadonlyMap<string, string>, record: FireRecord, failoverGapMs: number | null | undefined): Map<string, string> {
  const fields = new Map<string, string>();
  const previous = Number(current.get(record.job));
  if (!(previous >= record.scheduledAt)) {
    fields.set(record.job, String(record.scheduledAt));
    if (record.dispatchedAt != null) fields.set(`:dispatched:${record.job}`, String(record.dispatchedAt));
  }
  if (failoverGapMs != null) fields.set(':failover-gap', String(failoverGapMs));
  return fields;
}

/** The fire log of one lease, each record checked against the lease in the same step. */
export function memoryFireLog(server: MemoryLeaseServer, lease: string, request: <T>(operation: string, step: () => T) => Promise<T>): FireLog {
  return {
    load: () => request('load fires', () => server.fireLog(lease)),
    record(leaseValue, given, givenGapMs) {
      // Whole milliseconds, as every other store keeps them: a baseline is the server clock's
      // estimate now, which has a fraction.
      const record = { ...given, scheduledAt: Math.floor(given.scheduledAt), dispatchedAt: given.dispatchedAt == null ? given.dispatchedAt : Math.floor(given.dispatchedAt) };
      const failoverGapMs = givenGapMs == null ? givenGapMs : Math.floor(givenGapMs);
      const times = [record.scheduledAt, ...(record.dispatchedAt == null ? [] : [record.dispatchedAt]), ...(failoverGapMs == null ? [] : [failoverGapMs])];
      if (!times.every(Number.isSafeInteger)) return Promise.reject(new RangeError('record fires: times must be epoch milliseconds'));
      return request('record fires', () => (server.writeFireLog(lease, leaseValue, (current) => fieldsOf(current, record, failoverGapMs)) ? 1 : 0));
    },
  };
}
