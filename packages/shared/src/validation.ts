import type { z } from 'zod';
import type { ValidationIssue } from './errors.js';

/** Flattens zod issues into `{ path, message }` with dotted paths. */
export function toValidationIssues(error: z.ZodError): ValidationIssue[] {
  return error.issues.map((issue) => ({
    path: issue.path.map(String).join('.'),
    message: issue.message,
  }));
}
