import type { RedisClient } from '../redis-client.js';
import type { LeaseKeys } from '../lease/lease-keys.js';
import { FireRecordBatcher } from './fire-record-batcher.js';
import { schedulerScripts, type FireRecord } from './scheduler-scripts.js';

/**
 * The scheduler's record of what it dispatched, per job: where a new term resumes. What the
 * scheduler needs from the store that keeps it (today Redis, beside the lease).
 */
export interface FireLog {
  /** Every job's last recorded fire (epoch ms, as text), and the store's marks (see scheduler.ts). */
  load(): Promise<Record<string, string>>;
  /**
   * Records one fire (or a baseline) under `leaseValue`, only while that lease is still ours.
   * @returns 1 when recorded, 0 when the lease is not ours.
   */
  record(leaseValue: string, record: FireRecord, failoverGapMs?: number | null): Promise<number>;
}

/** The fire log in a Redis hash beside the lease, its records batched per turn of the event loop. */
export function redisFireLog(redis: RedisClient, keys: LeaseKeys): FireLog {
  const scripts = schedulerScripts(redis);
  const batcher = new FireRecordBatcher((leaseValue, records, gapMs) => scripts.recordFires(keys.lease, keys.fires, leaseValue, records, gapMs));
  return {
    load: () => redis.hgetall(keys.fires),
    record: (leaseValue, record, failoverGapMs) => batcher.record(leaseValue, record, failoverGapMs),
  };
}
