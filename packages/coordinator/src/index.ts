export { createCoordinator, createLeaseGroup } from './create.js';
export {
  Coordinator,
  type CoordinatorEventMap,
  type CreateCoordinatorOptions,
  type LeaderTerm,
} from './lease/coordinator.js';
export { leaseKeys, type LeaseKeys } from './store/redis/lease-keys.js';
export { redisLeases, type RedisLeasesOptions } from './store/redis/redis-backend.js';
export type { LeaseBackend, LeaseStoreKind } from './store/lease-backend.js';
export type { Leadership } from './scheduler/leadership.js';
export type { FireLog, FireRecord } from './store/fire-log.js';
export { parseLeaseValue } from './store/lease-value.js';
export { LeaseGroup, type CreateLeaseGroupOptions, type LeaseGroupEventMap } from './lease-group/lease-group.js';
export { createShardedScheduler, type CreateShardedSchedulerOptions, type ShardedScheduler } from './scheduler/sharded-scheduler.js';
export type { RedisClient } from './redis-client.js';
export type { Clock } from './internal/clock.js';
export {
  createScheduler,
  Scheduler,
  type CreateSchedulerOptions,
  type FireContext,
  type FireHandler,
  type SchedulerEventMap,
  type JobDefinition,
  type QueueLike,
} from './scheduler/scheduler.js';
// The fire id is part of the wire contract (it travels in every envelope): built and parsed in shared.
export { dispatchKey, fireId, parseFireId } from '@fenced/shared';
export { graphileWorkerQueue, pgBossQueue, type GraphileWorkerAddJob, type PgBossSend } from './scheduler/queue-targets.js';
export { type MisfirePolicy } from './scheduler/catch-up.js';
export type { RetryPolicy } from './scheduler/retry-delay.js';
