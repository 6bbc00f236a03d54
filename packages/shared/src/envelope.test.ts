import { MAX_TOKEN, parseToken } from './token.js';
import { describe, expect, it } from 'vitest';
import { createEnvelope, parseEnvelope } from './envelope.js';
import { InvalidEnvelopeError } from './errors.js';

const valid = {
  v: 1,
  job: 'invoices',
  fireId: 'invoices@2026-11-29T10:00:00.000Z',
  scheduledAt: '2026-11-29T10:00:00.000Z',
  token: '9223372036854775807',
  issuer: 'node-a',
  payload: { n: 1 },
};

function issuePaths(input: unknown): string[] {
  try {
    parseEnvelope(input);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidEnvelopeError);
    return (err as InvalidEnvelopeError).issues.map((i) => i.path);
  }
  throw new Error('expected the envelope to be refused');
}

describe('createEnvelope', () => {
  it('builds what parseEnvelope accepts: version, fire id, ISO due time, the token as a decimal string', () => {
    const envelope = createEnvelope({ job: 'invoices', scheduledAt: Date.UTC(2026, 10, 29, 10), token: MAX_TOKEN, issuer: 'node-a', payload: { n: 1 } });
    expect(envelope).toEqual({
      v: 1,
      job: 'invoices',
      fireId: 'invoices@20261129T100000.000Z',
      scheduledAt: '2026-11-29T10:00:00.000Z',
      token: '9223372036854775807',
      issuer: 'node-a',
      payload: { n: 1 },
    });
    // The receiver gets the same fields with the token parsed: the one parse of its side.
    expect(parseEnvelope(envelope)).toEqual({ ...envelope, token: MAX_TOKEN });
  });

  it('survives the JSON of a queue when the job has no payload (found by the queue examples)', () => {
    const envelope = createEnvelope({ job: 'invoices', scheduledAt: Date.UTC(2026, 10, 29, 10), token: parseToken(7n), issuer: 'node-a', payload: undefined });
    expect(envelope.payload).toBeNull();
    expect(parseEnvelope(JSON.parse(JSON.stringify(envelope)))).toEqual({ ...envelope, token: 7n });
  });
});

describe('parseEnvelope', () => {
  it('accepts a well-formed envelope, its token parsed to a bigint whose decimal form is the wire string', () => {
    const received = parseEnvelope(valid);
    expect(received).toEqual({ ...valid, token: BigInt(valid.token) });
    expect(String(received.token)).toBe(valid.token);
  });

  it.each([
    ['missing token', { ...valid, token: undefined }, 'token'],
    ['token "abc"', { ...valid, token: 'abc' }, 'token'],
    ['token -1', { ...valid, token: '-1' }, 'token'],
    ['token 0', { ...valid, token: '0' }, 'token'],
    ['token 2^64', { ...valid, token: '18446744073709551616' }, 'token'],
    ['token as a number', { ...valid, token: 5 }, 'token'],
    ['wrong version', { ...valid, v: 2 }, 'v'],
    ['scheduledAt not ISO', { ...valid, scheduledAt: 'yesterday' }, 'scheduledAt'],
    ['empty fireId', { ...valid, fireId: '' }, 'fireId'],
    ['a fireId with NUL', { ...valid, fireId: 'invoices\u0000x' }, 'fireId'],
    ['a fireId with a lone surrogate', { ...valid, fireId: 'a\uD800' }, 'fireId'],
    ['a job with NUL', { ...valid, job: 'in\u0000voices' }, 'job'],
    ['an issuer with a lone surrogate', { ...valid, issuer: 'node\uDC00' }, 'issuer'],
    ['extra field', { ...valid, tokne: '5' }, ''],
  ])('refuses %s, naming the field', (_label, input, path) => {
    expect(issuePaths(input)).toContain(path);
  });

  it('tells NUL and lone surrogates apart from the field, with a message that says why', () => {
    expect(() => parseEnvelope({ ...valid, fireId: 'a\u0000' })).toThrow(/fireId: must not contain a NUL character/);
    expect(() => parseEnvelope({ ...valid, fireId: 'a\uD801' })).toThrow(/fireId: must be well-formed unicode/);
  });

  it('refuses an envelope whose field cannot be read as an envelope error naming it, not the raw error', () => {
    const hostile = { ...valid };
    Object.defineProperty(hostile, 'payload', { enumerable: true, get: () => { throw new RangeError('boom'); } });
    expect(issuePaths(hostile)).toEqual(['payload']);
    const proxy = new Proxy({}, { ownKeys: () => { throw new TypeError('no keys'); } });
    expect(issuePaths(proxy)).toEqual(['']);
  });

  it('reads each field once: what was validated is what the handler gets', () => {
    let reads = 0;
    const flipping = { ...valid };
    Object.defineProperty(flipping, 'token', { enumerable: true, get: () => (++reads === 1 ? '5' : 'not a token') });
    expect(parseEnvelope(flipping).token).toBe(5n);
    expect(reads).toBe(1);
  });

  it('refuses non-objects', () => {
    expect(issuePaths('x')).toEqual(['']);
    expect(issuePaths(null)).toEqual(['']);
  });
});
