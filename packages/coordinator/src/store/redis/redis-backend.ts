import { keyPrefixSchema, parseOptions, redisClientSchema } from '@fenced/shared/internal';
import { z } from 'zod';
import type { RedisClient } from '../../redis-client.js';
import type { IoRedisClient } from './ioredis-client.js';
import { redisMembership } from './redis-membership.js';
import { redisFireLog } from './redis-fire-log.js';
import type { LeaseBackend } from '../lease-backend.js';
import { leaseKeys } from './lease-keys.js';
import { evictionProblem } from './redis-config.js';
import { openReleaseHub } from './release-hub.js';
import { redisLeaseStore } from './redis-lease-store.js';

const redisLeasesOptionsSchema = z.object({
  redis: redisClientSchema,
  /**
   * Prefix of every Redis key of the leases (`<prefix>:{<lease>}:lease`, …).
   * @defaultValue `'fenced'`
   */
  keyPrefix: keyPrefixSchema,
});

export type RedisLeasesOptions = Omit<z.input<typeof redisLeasesOptionsSchema>, 'redis'>;

/**
 * Leases in Redis (a single server, Sentinel or Cluster): a key per lease holding `<token>:<nodeId>`
 * with the TTL, its token minted by the same script that grants it, a release channel, and the
 * scheduler's record in a hash beside it. `createCoordinator({ redis })` is short for
 * `createCoordinator({ store: redisLeases(redis) })`.
 *
 * @throws {ConfigError} for a client that is not an ioredis client (or a Sentinel one without
 * `failoverDetector`), or a bad key prefix.
 * @example
 * ```ts
 * const coordinator = createCoordinator({ store: redisLeases(redis, { keyPrefix: 'billing' }), lease: 'invoices' });
 * ```
 */
export function redisLeases(client: RedisClient, options: RedisLeasesOptions = {}): LeaseBackend {
  const { keyPrefix } = parseOptions('redis leases', redisLeasesOptionsSchema, { ...options, redis: client });
  // The schema checked that it is an ioredis client: from here on, one.
  const redis = client as IoRedisClient;
  return Object.freeze({
    kind: 'redis' as const,
    openLease: (lease: string, nodeId: string, timeoutMs: number) => redisLeaseStore(redis, leaseKeys(keyPrefix, lease), nodeId, timeoutMs),
    fireLog: (lease: string) => redisFireLog(redis, leaseKeys(keyPrefix, lease)),
    openReleaseHub: (timeoutMs: number, onError: (error: unknown) => void) => openReleaseHub(redis, (lease) => leaseKeys(keyPrefix, lease).released, timeoutMs, onError),
    membership: (group: string) => redisMembership(redis, keyPrefix, group),
    configProblem: (timeoutMs: number) => evictionProblem(redis, timeoutMs),
  });
}
