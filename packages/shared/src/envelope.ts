import { z } from 'zod';
import { InvalidEnvelopeError } from './errors.js';
import { isToken, parseToken, type Token } from './token.js';
import { toValidationIssues } from './validation.js';

/** Current envelope format version. */
export const ENVELOPE_VERSION = 1;

/** A token as it travels on the wire: a canonical decimal string in 1..2^63-1. */
export const tokenStringSchema = z
  .string()
  .refine((s) => isToken(s), { message: 'must be a canonical decimal string in 1..2^63-1' });

/** A token from any accepted input form (bigint, safe-integer number, decimal string), parsed to bigint. */
export const tokenSchema = z.unknown().transform((value, ctx): Token => {
  try {
    return parseToken(value);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});

const nameSchema = z.string().min(1).max(200);

/**
 * The fenced task envelope: what the coordinator emits for every fire and what handler wrappers
 * accept. Unknown fields are refused (a typo must not silently drop a field such as `token`).
 */
export const envelopeSchema = z.strictObject({
  v: z.literal(ENVELOPE_VERSION),
  job: nameSchema,
  fireId: z.string().min(1).max(512),
  scheduledAt: z.iso.datetime({ offset: true }),
  token: tokenStringSchema,
  issuer: nameSchema,
  payload: z.unknown(),
});

/** A validated envelope, as it travels (token as a decimal string). */
export type Envelope = z.infer<typeof envelopeSchema>;

/**
 * Validates unknown input as an envelope.
 *
 * @throws {InvalidEnvelopeError} naming each offending field.
 */
export function parseEnvelope(input: unknown): Envelope {
  const result = envelopeSchema.safeParse(input);
  if (!result.success) throw new InvalidEnvelopeError(toValidationIssues(result.error));
  return result.data;
}
