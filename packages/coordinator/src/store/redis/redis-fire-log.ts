import type { IoRedisClient } from './ioredis-client.js';
import type { LeaseKeys } from './lease-keys.js';
import { FireRecordBatcher } from '../fire-record-batcher.js';
import type { FireLog } from '../fire-log.js';
import { schedulerScripts } from './scheduler-scripts.js';

/** The fire log in a Redis hash beside the lease, its records batched per turn of the event loop. */
export function redisFireLog(redis: IoRedisClient, keys: LeaseKeys): FireLog {
  const scripts = schedulerScripts(redis);
  const batcher = new FireRecordBatcher((leaseValue, records, gapMs) => scripts.recordFires(keys.lease, keys.fires, leaseValue, records, gapMs));
  return {
    load: () => redis.hgetall(keys.fires),
    record: (leaseValue, record, failoverGapMs) => batcher.record(leaseValue, record, failoverGapMs),
  };
}
