export {
  createCoordinator,
  Coordinator,
  type CoordinatorEventMap,
  type CreateCoordinatorOptions,
  type LeaderTerm,
} from './lease/coordinator.js';
export { leaseKeys, type LeaseKeys } from './lease/lease-keys.js';
export type { Clock } from './internal/timing.js';
export {
  createScheduler,
  Scheduler,
  type CreateSchedulerOptions,
  type FireContext,
  type FireHandler,
  type JobDefinition,
  type QueueLike,
} from './scheduler/scheduler.js';
export { fireId, parseFireId } from './scheduler/fire-id.js';
export { type MisfirePolicy } from './scheduler/catch-up.js';
