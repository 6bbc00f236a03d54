import type { z } from 'zod';
import { ConfigError } from '../errors.js';
import { toValidationIssues } from '../validation.js';

/**
 * Parses factory options with `schema` once and freezes the result.
 *
 * @throws {ConfigError} carrying the flattened zod issues, each naming its option.
 */
export function parseOptions<S extends z.ZodType>(component: string, schema: S, input: unknown): Readonly<z.output<S>> {
  const result = schema.safeParse(input);
  if (!result.success) throw new ConfigError(component, toValidationIssues(result.error));
  return Object.freeze(result.data);
}
