import { describe, expect, it } from 'vitest';
import { createEnvelope } from './envelope.js';
import { isFencedError } from './errors.js';
import { signEnvelope, verifyEnvelope } from './signing.js';
import { parseToken } from './token.js';

const envelope = createEnvelope({ job: 'invoices', scheduledAt: Date.UTC(2026, 11, 3, 10), token: parseToken(7n), issuer: 'node-a', payload: { n: 1 } });

describe('signEnvelope', () => {
  it('signs with a key of 32 bytes or more, and the signature verifies', () => {
    const secret = 'x'.repeat(32);
    const signed = signEnvelope(envelope, { kid: 'k1', secret });
    expect(signed).toMatchObject({ kid: 'k1', sig: expect.any(String) });
    expect(() => verifyEnvelope(signed, { k1: secret })).not.toThrow();
  });

  it('refuses a secret under 32 bytes, or an empty kid, with a typed ConfigError naming the field (a regression: it was a plain TypeError)', () => {
    const short = (() => {
      try {
        signEnvelope(envelope, { kid: 'k1', secret: 'x'.repeat(31) });
      } catch (err) {
        return err;
      }
    })();
    expect(isFencedError(short, 'INVALID_CONFIG')).toBe(true);
    expect((short as Error).message).toContain('secret: must be at least 32 bytes (got 31)');
    expect(() => signEnvelope(envelope, { kid: '', secret: Buffer.alloc(32) })).toThrow(/kid: must be a non-empty string/);
    expect(() => signEnvelope(envelope, { kid: 'k1', secret: 42 as unknown as string })).toThrow(/secret: must be a string or a Buffer/);
  });
});
