import { z } from 'zod';
import { envelopeSchema, type Envelope, type ReceivedEnvelope } from './envelope.js';
import { InvalidEnvelopeError } from './errors.js';
import { payloadDigest, verifySignedFields, type VerificationKeys } from './signing.js';
import { parseToken, type Token } from './token.js';
import { toValidationIssues } from './validation.js';

/**
 * A fire as it travels on an HTTP request to a service of the team's own: the fire's envelope without
 * its payload (the request has a body of its own), the payload kept as the digest its signature
 * covers, so the service verifies the scheduler's signature without seeing the payload.
 *
 * The header, for services in any language (docs/http-fire-header.md):
 *   `Fenced-Fire: <base64url, no padding, of the UTF-8 JSON object below>`
 *   `{"v":1,"job":…,"fireId":…,"scheduledAt":…,"token":"42","issuer":…,"payloadDigest":…,"kid":…,"sig":…}`
 * `token` is a decimal string (1..2^63-1, no sign or leading zero); `kid` and `sig` are present when
 * the scheduler signs. The signature is HMAC-SHA-256, base64url, over the lines
 * `"fenced-envelope-v1"`, v, kid, job, fireId, token, issuer, scheduledAt, payloadDigest, each
 * JSON-encoded, joined by `\n`: exactly what `signEnvelope` signed.
 */
export const FIRE_HEADER = 'fenced-fire';

/** The longest `Fenced-Fire` value accepted: the longest valid fields fit in well under it. */
export const MAX_FIRE_HEADER_LENGTH = 8192;

const fireHeaderSchema = envelopeSchema.omit({ payload: true }).extend({
  payloadDigest: z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'must be a base64url SHA-256'),
});

/** The fields of a `Fenced-Fire` header as they travel (the token a decimal string). */
export type FireHeaderFields = z.infer<typeof fireHeaderSchema>;

/** A `Fenced-Fire` header once parsed: every field validated, the token parsed (the one parse on the receiving side). */
export type ReceivedFire = Omit<FireHeaderFields, 'token'> & { readonly token: Token };

/** The `Fenced-Fire` header's value for a fire's envelope (signed or not, as the scheduler made it). */
export function encodeFireHeader(envelope: Envelope | ReceivedEnvelope): string {
  const fields: FireHeaderFields = {
    v: envelope.v,
    job: envelope.job,
    fireId: envelope.fireId,
    scheduledAt: envelope.scheduledAt,
    token: String(envelope.token),
    issuer: envelope.issuer,
    payloadDigest: payloadDigest(envelope.payload),
    ...(envelope.kid === undefined ? {} : { kid: envelope.kid }),
    ...(envelope.sig === undefined ? {} : { sig: envelope.sig }),
  };
  return Buffer.from(JSON.stringify(fields), 'utf8').toString('base64url');
}

/**
 * Parses a `Fenced-Fire` header's value (validated as strictly as an envelope: unknown fields refused).
 *
 * @throws {InvalidEnvelopeError} naming what is wrong (path `fenced-fire` when the value itself is not base64url JSON).
 */
export function parseFireHeader(value: unknown): ReceivedFire {
  if (Array.isArray(value)) throw headerError('was sent more than once');
  if (typeof value !== 'string' || value.length === 0) throw headerError('is missing');
  // Node's http joins a header sent twice with ", ": base64url has no comma, so one means two headers.
  if (value.includes(',')) throw headerError('was sent more than once');
  if (value.length > MAX_FIRE_HEADER_LENGTH) throw headerError(`is ${value.length} characters, at most ${MAX_FIRE_HEADER_LENGTH} allowed`);
  if (!/^[A-Za-z0-9_-]+$/.test(value)) throw headerError('must be base64url without padding');
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    throw headerError('must be base64url of a JSON object');
  }
  const result = fireHeaderSchema.safeParse(json);
  if (!result.success) throw new InvalidEnvelopeError(toValidationIssues(result.error));
  return { ...result.data, token: parseToken(result.data.token) };
}

/**
 * Verifies a received fire's signature (see `verifyEnvelope`).
 *
 * @throws {EnvelopeSignatureError} when it is unsigned, names an unknown key, or does not match.
 */
export function verifyFire(fire: ReceivedFire, keys: VerificationKeys): void {
  verifySignedFields(fire, keys);
}

const headerError = (message: string) => new InvalidEnvelopeError([{ path: FIRE_HEADER, message }]);
