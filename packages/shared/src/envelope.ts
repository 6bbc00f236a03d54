import { z } from 'zod';
import { InvalidEnvelopeError, type ValidationIssue } from './errors.js';
import { fireId, instantText } from './fire-id.js';
import { formatToken, isToken, parseToken, type Token } from './token.js';
import { toValidationIssues } from './validation.js';

/** Current envelope format version. */
export const ENVELOPE_VERSION = 1;

/** A token as it travels on the wire: a canonical decimal string in 1..2^63-1. */
export const tokenStringSchema = z
  .string()
  .refine((s) => isToken(s), { message: 'must be a canonical decimal string in 1..2^63-1' });

/**
 * The envelope's token: the wire's decimal string in, the parsed `Token` out. This is the edge: the
 * one parse of a fire's token on the receiving side (the handler and the guard below it take the
 * `Token` as it is).
 */
const receivedTokenSchema = z.string().transform((text, ctx): Token => {
  try {
    return parseToken(text);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be a canonical decimal string in 1..2^63-1' });
    return z.NEVER;
  }
});
/**
 * Text that reaches PostgreSQL and Redis as it is: PostgreSQL `text` cannot hold NUL, and a lone
 * surrogate is replaced on the way in, so two distinct ids (`'a\uD800'`, `'a\uD801'`) would be stored
 * as the same text, and the second fire dropped as a duplicate of the first.
 */
const storableText = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((s) => !s.includes('\u0000'), 'must not contain a NUL character')
    .refine((s) => s.isWellFormed(), 'must be well-formed unicode (no lone surrogate)');

const nameSchema = storableText(200);
const fireIdSchema = storableText(512);

/**
 * Validates a fire id given on its own (the `fireId` option of `guardedWrite`) by the envelope's rule:
 * 1-512 characters, no NUL, well-formed unicode.
 *
 * @throws {InvalidEnvelopeError} naming `fireId`.
 */
export function parseFireIdText(input: unknown): string {
  const result = fireIdSchema.safeParse(input);
  if (!result.success) throw new InvalidEnvelopeError(result.error.issues.map((i) => ({ path: 'fireId', message: i.message })));
  return result.data;
}

/**
 * Validates the node id a token was issued to, given on its own (the `issuer` option of
 * `guardedWrite`) by the envelope's rule: 1-200 characters, no NUL, well-formed unicode.
 *
 * @throws {InvalidEnvelopeError} naming `issuer`.
 */
export function parseIssuerText(input: unknown): string {
  const result = nameSchema.safeParse(input);
  if (!result.success) throw new InvalidEnvelopeError(result.error.issues.map((i) => ({ path: 'issuer', message: i.message })));
  return result.data;
}

/**
 * The fenced task envelope: what the coordinator emits for every fire and what handler wrappers
 * accept. Unknown fields are refused (a typo must not silently drop a field such as `token`).
 */
export const envelopeSchema = z.strictObject({
  v: z.literal(ENVELOPE_VERSION),
  job: nameSchema,
  fireId: fireIdSchema,
  scheduledAt: z.iso.datetime({ offset: true }),
  token: tokenStringSchema,
  issuer: nameSchema,
  payload: z.unknown(),
  /** Key id of the signature (see `signEnvelope`), for key rotation. */
  kid: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/).optional(),
  /** HMAC-SHA-256 over the canonical form, base64url. */
  sig: z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'must be a base64url HMAC-SHA-256').optional(),
});

/** A validated envelope, as it travels (token as a decimal string). */
export type Envelope = z.infer<typeof envelopeSchema>;

// What a receiver parses: the same fields, with the token parsed on the way.
const receivedEnvelopeSchema = envelopeSchema.extend({ token: receivedTokenSchema });

/**
 * An envelope as a receiver has it after `parseEnvelope`: every field validated and the token parsed
 * (a `Token`, whose decimal form is exactly the wire's string, so a signature still verifies).
 */
export type ReceivedEnvelope = z.output<typeof receivedEnvelopeSchema>;

/** What a dispatcher knows of one fire; `createEnvelope` turns it into the envelope on the wire. */
export interface EnvelopeFields {
  readonly job: string;
  /** When the fire was due, epoch ms (by the scheduler's clock). */
  readonly scheduledAt: number;
  readonly token: Token;
  /** The node that dispatches it. */
  readonly issuer: string;
  readonly payload: unknown;
}

/**
 * Builds the envelope of one fire: the version, the deterministic fire id, the due time as ISO-8601
 * and the token as its decimal string. The one place envelopes are made (the scheduler dispatches
 * what this returns; guards parse it with {@link parseEnvelope}).
 *
 * @example createEnvelope({ job: 'invoices', scheduledAt: Date.UTC(2026, 10, 29, 10), token: parseToken(7n), issuer: 'node-a', payload: null })
 */
export function createEnvelope(fields: EnvelopeFields): Envelope {
  return {
    v: ENVELOPE_VERSION,
    job: fields.job,
    fireId: fireId(fields.job, fields.scheduledAt),
    scheduledAt: instantText(fields.scheduledAt).iso,
    token: formatToken(fields.token),
    issuer: fields.issuer,
    // A job without a payload: null, not undefined. JSON has no undefined, so a queue would store the
    // envelope without its payload field, and every wrapper would refuse it as malformed.
    payload: fields.payload === undefined ? null : fields.payload,
  };
}

/** The largest payload accepted by default, in bytes of its JSON form. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024;

/**
 * Validates unknown input as an envelope.
 *
 * @param maxPayloadBytes - the payload's JSON form may not be larger (default 256 KiB).
 * @throws {InvalidEnvelopeError} naming each offending field.
 */
export function parseEnvelope(input: unknown, maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES): ReceivedEnvelope {
  const result = receivedEnvelopeSchema.safeParse(snapshot(input));
  if (!result.success) throw new InvalidEnvelopeError(toValidationIssues(result.error));
  let size: number;
  try {
    size = Buffer.byteLength(JSON.stringify(result.data.payload) ?? '', 'utf8');
  } catch {
    throw new InvalidEnvelopeError([{ path: 'payload', message: 'must be JSON-serializable' }]);
  }
  if (size > maxPayloadBytes) {
    throw new InvalidEnvelopeError([{ path: 'payload', message: `is ${size} bytes as JSON, at most ${maxPayloadBytes} allowed` }]);
  }
  return result.data;
}

/**
 * The envelope's own fields, each read exactly once. A field that cannot be read (a getter or a proxy
 * that throws) is refused as an envelope error naming it, rather than leaking its raw error; and
 * what is validated is what the handler gets, whatever a getter would answer the second time.
 */
function snapshot(input: unknown): unknown {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return input;
  const copy: Record<string, unknown> = {};
  const issues: ValidationIssue[] = [];
  let keys: string[];
  try {
    keys = Object.keys(input);
  } catch (err) {
    throw new InvalidEnvelopeError([{ path: '', message: `could not be read: ${messageOf(err)}` }]);
  }
  for (const key of keys) {
    try {
      copy[key] = (input as Record<string, unknown>)[key];
    } catch (err) {
      issues.push({ path: key, message: `could not be read: ${messageOf(err)}` });
    }
  }
  if (issues.length > 0) throw new InvalidEnvelopeError(issues);
  return copy;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));
