import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { Envelope, ReceivedEnvelope } from './envelope.js';
import { ConfigError, EnvelopeSignatureError } from './errors.js';

/**
 * Signed envelopes: a token is an order, not a credential. Whoever can hand a guard token 2^63-1
 * locks every honest leader out for good, so a guard given keys accepts only envelopes signed by
 * one of them.
 */

/** A signing key: its id travels in the envelope (`kid`) so keys can be rotated. */
export interface SigningKey {
  readonly kid: string;
  /** At least 32 bytes of secret ({@link MIN_SECRET_BYTES}): `randomBytes(32).toString('base64url')`. */
  readonly secret: string | Buffer;
}

/** Verification keys by id: keep the old key here while envelopes signed with it may still arrive. */
export type VerificationKeys = Readonly<Record<string, string | Buffer>>;

const CANONICAL_PREFIX = 'fenced-envelope-v1';

/**
 * The exact bytes that are signed: every field that matters, each JSON-encoded on its own line (no
 * delimiter can be smuggled inside a field), with the payload as the SHA-256 of its canonical JSON
 * (object keys sorted), so that tampering with the payload breaks the signature too.
 */
export function canonicalEnvelope(envelope: Envelope | ReceivedEnvelope, kid: string): string {
  return canonicalSignedFields({ ...envelope, payloadDigest: payloadDigest(envelope.payload) }, kid);
}

/** The SHA-256 of a payload's canonical JSON, base64url: what a signature covers of the payload. */
export function payloadDigest(payload: unknown): string {
  return createHash('sha256').update(canonicalJson(payload)).digest('base64url');
}

/** The fields a signature covers, the payload given by its digest (an HTTP fire header carries no payload). */
export interface SignedFields {
  readonly v: number;
  readonly job: string;
  readonly fireId: string;
  readonly token: string | bigint;
  readonly issuer: string;
  readonly scheduledAt: string;
  readonly payloadDigest: string;
}

/** The canonical form of {@link SignedFields}: the bytes an envelope's signature is computed over. */
export function canonicalSignedFields(fields: SignedFields, kid: string): string {
  // The token as the wire's decimal string: a parsed token's decimal form is that string exactly
  // (only canonical decimals parse), so a received envelope verifies as the one that was signed.
  return [CANONICAL_PREFIX, fields.v, kid, fields.job, fields.fireId, String(fields.token), fields.issuer, fields.scheduledAt, fields.payloadDigest]
    .map((field) => JSON.stringify(field))
    .join('\n');
}

/**
 * Verifies a signature over {@link SignedFields} in constant time (`verifyEnvelope` for an envelope
 * that carries its payload; this for one that carries the payload's digest, such as a fire header).
 *
 * @throws {EnvelopeSignatureError} when it is unsigned, names an unknown key, or does not match.
 */
export function verifySignedFields(fields: SignedFields & { readonly kid?: string | undefined; readonly sig?: string | undefined }, keys: VerificationKeys): void {
  if (fields.sig === undefined || fields.kid === undefined) throw new EnvelopeSignatureError('unsigned', fields.kid);
  if (!Object.hasOwn(keys, fields.kid)) throw new EnvelopeSignatureError('unknown-key', fields.kid);
  const expected = createHmac('sha256', keys[fields.kid]!).update(canonicalSignedFields(fields, fields.kid)).digest();
  const given = Buffer.from(fields.sig, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new EnvelopeSignatureError('mismatch', fields.kid);
  }
}

/** The shortest secret a signing key may have, in bytes: HMAC-SHA-256 is as strong as its key, up to its 32-byte output. */
export const MIN_SECRET_BYTES = 32;

/**
 * Signs an envelope with HMAC-SHA-256.
 *
 * @throws {ConfigError} (`INVALID_CONFIG`) when the key's secret is under {@link MIN_SECRET_BYTES}
 * bytes or its `kid` is empty; nothing is signed.
 * @example
 * ```ts
 * createScheduler({ coordinator, jobs, seal: (e) => signEnvelope(e, { kid: '2026-11', secret }) });
 * ```
 */
export function signEnvelope(envelope: Envelope, key: SigningKey): Envelope {
  const issues = [];
  if (typeof key?.kid !== 'string' || key.kid === '') issues.push({ path: 'kid', message: 'must be a non-empty string' });
  if (typeof key?.secret !== 'string' && !Buffer.isBuffer(key?.secret)) issues.push({ path: 'secret', message: 'must be a string or a Buffer' });
  else if (Buffer.byteLength(key.secret) < MIN_SECRET_BYTES) issues.push({ path: 'secret', message: `must be at least ${MIN_SECRET_BYTES} bytes (got ${Buffer.byteLength(key.secret)}); for example randomBytes(32).toString('base64url')` });
  if (issues.length > 0) throw new ConfigError('signing key', issues);
  const { sig: _sig, kid: _kid, ...unsigned } = envelope;
  const sig = createHmac('sha256', key.secret).update(canonicalEnvelope(unsigned, key.kid)).digest('base64url');
  return { ...unsigned, kid: key.kid, sig };
}

/**
 * Verifies an envelope's signature in constant time.
 *
 * @throws {EnvelopeSignatureError} when it is unsigned, names an unknown key, or does not match.
 */
export function verifyEnvelope(envelope: Envelope | ReceivedEnvelope, keys: VerificationKeys): void {
  if (envelope.sig === undefined || envelope.kid === undefined) throw new EnvelopeSignatureError('unsigned', envelope.kid);
  verifySignedFields({ ...envelope, payloadDigest: payloadDigest(envelope.payload) }, keys);
}

/** JSON with object keys sorted at every level: one byte string per value. */
export function canonicalJson(value: unknown): string {
  if (value === undefined) return 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const entries = Object.keys(value)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}
