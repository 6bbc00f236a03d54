import { z } from 'zod';

/**
 * An OpenTelemetry `MeterProvider`, checked by shape (`getMeter` is all the packages call), so that
 * `shared` needs no OpenTelemetry import and any SDK's provider, or a test's, is accepted.
 */
export const meterProviderSchema = z.custom<object>(
  (value) => typeof value === 'object' && value !== null && typeof (value as { getMeter?: unknown }).getMeter === 'function',
  { message: 'must be an OpenTelemetry MeterProvider (with getMeter())' },
);
