export {
  createCoordinator,
  Coordinator,
  type CoordinatorEventMap,
  type CreateCoordinatorOptions,
  type LeaderTerm,
} from './lease/coordinator.js';
export { leaseKeys, type LeaseKeys } from './lease/lease-keys.js';
export type { Clock } from './internal/timing.js';
