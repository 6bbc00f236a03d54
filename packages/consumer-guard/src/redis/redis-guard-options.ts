import { z } from 'zod';
import { redisClientSchema, keyPrefixSchema } from '@fenced/shared/internal';
import { fenceGuardOptionsSchema } from '../fence-guard-options.js';

/** Options of `createRedisGuard`, with their defaults. */
export const redisGuardOptionsSchema = fenceGuardOptionsSchema.extend({
  /** An ioredis client: `Redis` (a Sentinel one with `failoverDetector: true`) or `Cluster`. */
  redis: redisClientSchema,
  /**
   * Prefix of the guard's Redis keys.
   * @defaultValue `'fenced'`
   */
  keyPrefix: keyPrefixSchema,
});

export type RedisGuardOptionsInput = z.input<typeof redisGuardOptionsSchema>;
