import { describe, expect, it } from 'vitest';
import { parseEnvelope } from './envelope.js';
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

describe('parseEnvelope', () => {
  it('accepts a well-formed envelope', () => {
    expect(parseEnvelope(valid)).toEqual(valid);
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
    ['extra field', { ...valid, tokne: '5' }, ''],
  ])('refuses %s, naming the field', (_label, input, path) => {
    expect(issuePaths(input)).toContain(path);
  });

  it('refuses non-objects', () => {
    expect(issuePaths('x')).toEqual(['']);
    expect(issuePaths(null)).toEqual(['']);
  });
});
