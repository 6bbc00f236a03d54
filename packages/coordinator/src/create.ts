import { parseOptions } from '@fenced/shared/internal';
import { Coordinator } from './lease/coordinator.js';
import { coordinatorOptionsSchema } from './lease/coordinator-options.js';
import type { CreateCoordinatorOptions } from './lease/coordinator-types.js';
import { LeaseGroup, type CreateLeaseGroupOptions } from './lease-group/lease-group.js';
import { leaseGroupOptionsSchema } from './lease-group/lease-group-options.js';
import type { RedisClient } from './redis-client.js';
import type { LeaseBackend } from './store/lease-backend.js';
import { redisLeases } from './store/redis/redis-backend.js';

// The package's entry points, and the one place where `{ redis }` becomes a store: the state
// machines under them take a `LeaseBackend` and name no store, so Redis is the default of these
// functions, not of the coordinator or the lease group.

interface StoreChoice {
  readonly redis?: RedisClient | undefined;
  readonly store?: LeaseBackend | undefined;
  readonly keyPrefix?: string | undefined;
}

/** The options with `redis` (and its key prefix) turned into `store: redisLeases(redis, { keyPrefix })`. */
function withStore<T extends StoreChoice>(options: T): T {
  if (options.store !== undefined || options.redis === undefined) return options;
  const { redis, keyPrefix, ...rest } = options;
  return { ...rest, store: redisLeases(redis, keyPrefix === undefined ? {} : { keyPrefix }) } as T;
}

/**
 * Creates a coordinator. Call `start()` to join the election.
 *
 * @throws {ConfigError} for bad options (names the option).
 * @example
 * ```ts
 * const coordinator = createCoordinator({ redis, lease: 'billing', ttlMs: 15_000, renewIntervalMs: 5_000, fences: [guard] });
 * coordinator.on('elected', ({ token }) => log.info({ token }, 'leading'));
 * await coordinator.start();
 * ```
 */
export function createCoordinator(options: CreateCoordinatorOptions): Coordinator {
  // Parsed first, so that a bad `redis` or `keyPrefix` is reported as the coordinator's option.
  parseOptions('coordinator', coordinatorOptionsSchema, options);
  return new Coordinator(withStore(options));
}

/**
 * Creates a lease group. Call `start()` to join it.
 *
 * @throws {ConfigError} for bad options (names the option).
 * @example
 * ```ts
 * const group = createLeaseGroup({ redis, group: 'billing', shards: 64, ttlMs: 15_000, renewIntervalMs: 5_000,
 *   fences: (lease) => [createGuard({ db, resource: lease })] });
 * group.on('elected', ({ lease, token }) => log.info({ lease, token }, 'leading'));
 * await group.start();
 * ```
 */
export function createLeaseGroup(options: CreateLeaseGroupOptions): LeaseGroup {
  parseOptions('lease group', leaseGroupOptionsSchema, options);
  return new LeaseGroup(withStore(options));
}
