import { z } from 'zod';
import { isFunction, meterProviderSchema, redisClientSchema, keyPrefixSchema } from '@fenced/shared/internal';
import { resourceSchema } from '../resource-schema.js';

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
  keyPrefix: keyPrefixSchema,
  /** Receives structured events. */
  logger: z.custom<(event: never) => void>(isFunction, { message: 'must be a function' }).optional(),
  /**
   * The OpenTelemetry meter provider the guard's instruments come from (docs/operating.md, "Metrics").
   * @defaultValue the global provider of `@opentelemetry/api` when the guard is created
   */
  meterProvider: meterProviderSchema.optional(),
  /**
   * Label the instruments with the resource. Off by default: resources named per customer or per
   * tenant would make the series unbounded.
   * @defaultValue `false`
   */
  metricResourceAttribute: z.boolean().default(false),
});

export type RedisGuardOptionsInput = z.input<typeof redisGuardOptionsSchema>;
