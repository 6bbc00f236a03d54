import { z } from 'zod';
import { redisClientSchema } from '@fenced/shared/internal';
import { resourceSchema } from '../postgres/postgres-guard-options.js';

const isFunction = (v: unknown): v is (...args: never[]) => unknown => typeof v === 'function';

/** Options of `createRedisGuard`, with their defaults. */
export const redisGuardOptionsSchema = z.object({
  /** An ioredis client: `Redis` (a Sentinel one with `failoverDetector: true`) or `Cluster`. */
  redis: redisClientSchema,
  /** The resource this guard fences. */
  resource: resourceSchema,
  /**
   * Prefix of the guard's Redis keys.
   * @defaultValue `'fenced'`
   */
  keyPrefix: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 characters from A-Z a-z 0-9 _ . -').default('fenced'),
  /** Receives structured events. */
  logger: z.custom<(event: never) => void>(isFunction, { message: 'must be a function' }).optional(),
});

export type RedisGuardOptionsInput = z.input<typeof redisGuardOptionsSchema>;
