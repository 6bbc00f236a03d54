import { parseToken, type Token } from './token.js';
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  FencedError,
  FencedErrorCode,
  GuardUnavailableError,
  isFencedError,
  StaleTokenError,
  type DuplicateFireError,
  type InvalidEnvelopeError,
  type ValidationIssue,
} from './errors.js';

describe('errors', () => {
  it('carry a literal name, a stable code and their fields', () => {
    const err = new StaleTokenError('billing', parseToken(4n), parseToken(7n));
    expect(err.name).toBe('StaleTokenError');
    expect(err.code).toBe('STALE_TOKEN');
    expect(err).toMatchObject({ resource: 'billing', token: 4n, highest: 7n });
    expect(err).toBeInstanceOf(FencedError);
  });

  it('keep the wrapped driver error as cause', () => {
    const cause = new Error('ECONNREFUSED');
    const err = new GuardUnavailableError('down', { cause });
    expect(err.cause).toBe(cause);
    expect(err.code).toBe(FencedErrorCode.GUARD_UNAVAILABLE);
  });

  it('are recognised by brand, across copies of the package', () => {
    // What a second copy of @fenced/shared would throw: another class, the same Symbol.for brand.
    const foreign = Object.assign(new Error('x'), { code: 'STALE_TOKEN', [Symbol.for('fenced.error')]: true });
    expect(isFencedError(foreign)).toBe(true);
    expect(isFencedError(foreign, 'STALE_TOKEN')).toBe(true);
    expect(isFencedError(foreign, 'INVALID_TOKEN')).toBe(false);
    expect(isFencedError(new Error('plain'))).toBe(false);
    expect(isFencedError(null)).toBe(false);
  });

  it('narrow to the class of the code, so its fields need no cast (checked by the type check)', () => {
    const caught: unknown = new StaleTokenError('billing', parseToken(4n), parseToken(7n));
    if (isFencedError(caught, 'STALE_TOKEN')) {
      expectTypeOf(caught).toEqualTypeOf<StaleTokenError>();
      expectTypeOf(caught.highest).toEqualTypeOf<Token>();
      expect(caught.highest).toBe(7n);
    } else {
      throw new Error('not recognised');
    }
    const other: unknown = caught;
    if (isFencedError(other, 'INVALID_ENVELOPE')) expectTypeOf(other.issues).toEqualTypeOf<readonly ValidationIssue[]>();
    const another: unknown = caught;
    if (isFencedError(another, 'DUPLICATE_FIRE')) expectTypeOf(another).toEqualTypeOf<DuplicateFireError>();
    const any: unknown = caught;
    if (isFencedError(any)) expectTypeOf(any).toEqualTypeOf<FencedError>();
    expectTypeOf<InvalidEnvelopeError['code']>().toEqualTypeOf<FencedErrorCode>();
  });
});
