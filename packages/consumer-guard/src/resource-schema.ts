import { z } from 'zod';
import { parseResource } from '@fenced/shared';

/**
 * A resource name in an options schema (the rule itself is `parseResource`): one module of its own,
 * so every fence store's options (PostgreSQL, Redis) use it without importing each other.
 */
export const resourceSchema = z.string().superRefine((value, ctx) => {
  try {
    parseResource(value);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
  }
});
