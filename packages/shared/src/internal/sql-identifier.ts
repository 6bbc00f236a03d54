import { z } from 'zod';

/**
 * A PostgreSQL identifier we create objects under (schema, table). Lower case, so that the quoted
 * and unquoted spellings name the same object; short, so derived names (`<table>_check`) stay
 * within PostgreSQL's 63-byte limit.
 */
export const sqlIdentifierSchema = z
  .string()
  .regex(/^[a-z_][a-z0-9_]{0,47}$/, 'must match /^[a-z_][a-z0-9_]{0,47}$/ (a lower-case SQL identifier)');
