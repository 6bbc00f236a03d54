import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isFencedError } from './errors.js';
import { formatToken, MAX_TOKEN, parseToken, storedToken, type Token } from './token.js';

describe('parseToken', () => {
  it('accepts bigints, safe-integer numbers and canonical decimal strings in 1..2^63-1', () => {
    expect(parseToken(1n)).toBe(1n);
    expect(parseToken(42)).toBe(42n);
    expect(parseToken(Number.MAX_SAFE_INTEGER)).toBe(2n ** 53n - 1n);
    expect(parseToken('9223372036854775807')).toBe(MAX_TOKEN);
    expect(parseToken(MAX_TOKEN)).toBe(MAX_TOKEN);
  });

  it.each([
    ['zero', 0],
    ['zero bigint', 0n],
    ['negative', -1],
    ['negative string', '-1'],
    ['fraction', 1.5],
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['trailing garbage', '12abc'],
    ['exponent', '1e3'],
    ['leading zero', '007'],
    ['plus sign', '+5'],
    ['whitespace', ' 5'],
    ['empty', ''],
    ['number past 2^53', 2 ** 53 + 2],
    ['string past 2^63-1', '9223372036854775808'],
    ['bigint past 2^63-1', 2n ** 63n],
    ['2^64', '18446744073709551616'],
    ['object', { token: 1 }],
    ['array', [1]],
    ['null', null],
    ['undefined', undefined],
    ['boolean', true],
  ])('rejects %s with InvalidTokenError', (_label, input) => {
    let caught: unknown;
    try {
      parseToken(input);
    } catch (err) {
      caught = err;
    }
    expect(isFencedError(caught, 'INVALID_TOKEN')).toBe(true);
  });

  it('round-trips every valid token through its decimal form exactly', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: MAX_TOKEN }), (token) => {
        expect(parseToken(formatToken(parseToken(token)))).toBe(token);
        expect(formatToken(parseToken(token))).toBe(token.toString());
      }),
    );
  });

  it('keeps 2^53 and 2^53+1 apart (JS numbers would not)', () => {
    expect(parseToken('9007199254740993')).toBe(2n ** 53n + 1n);
    expect(parseToken('9007199254740993')).not.toBe(parseToken('9007199254740992'));
  });
});

describe('formatToken', () => {
  // A Token is valid by its type (only the parsers make one), so printing it parses nothing: a
  // scheduler fire formats its term's token for the envelope without validating it once more. The
  // cast below is the only way to hold an invalid one, and shows that nothing checks it again.
  it('prints a Token as it is, without parsing it again', () => {
    expect(formatToken(0n as Token)).toBe('0');
  });
});

describe('storedToken', () => {
  it('reads a token back from a store, as strictly as parseToken reads input', () => {
    expect(storedToken('42')).toBe(42n);
    for (const bad of ['0', '-1', '007', '1e3', '', '9223372036854775808', 'abc']) {
      expect(() => storedToken(bad), bad).toThrow(expect.objectContaining({ code: 'INVALID_TOKEN' }));
    }
  });
});
