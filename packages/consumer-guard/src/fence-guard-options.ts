import { z } from 'zod';
import { isFunction, meterProviderSchema } from '@fenced/shared/internal';
import { resourceSchema } from './resource-schema.js';

/**
 * The options every guard takes whatever its store (PostgreSQL, MySQL, Redis, the combined guard):
 * what it fences, where its events and instruments go. Each store's options extend these.
 */
export const fenceGuardOptionsSchema = z.object({
  /** The default resource this guard fences; `guardedWrite(token, fn, { resource })` overrides it. */
  resource: resourceSchema,
  /** Receives structured events; the guard never logs to the console. */
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
