export {
  createCoordinator,
  Coordinator,
  type CoordinatorEventMap,
  type CreateCoordinatorOptions,
  type LeaderTerm,
} from './lease/coordinator.js';
export { leaseKeys, type LeaseKeys } from './lease/lease-keys.js';
export type { Clock } from './lease/clock.js';
export {
  createScheduler,
  Scheduler,
  type CreateSchedulerOptions,
  type FireContext,
  type FireHandler,
  type JobDefinition,
  type QueueLike,
} from './scheduler/scheduler.js';
// The fire id is part of the wire contract (it travels in every envelope): built and parsed in shared.
export { fireId, parseFireId } from '@fenced/shared';
export { type MisfirePolicy } from './scheduler/catch-up.js';
