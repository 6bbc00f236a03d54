import { describe, expect, it } from 'vitest';
import { FencedError, FencedErrorCode, GuardUnavailableError, isFencedError, StaleTokenError } from './errors.js';

describe('errors', () => {
  it('carry a literal name, a stable code and their fields', () => {
    const err = new StaleTokenError('billing', 4n, 7n);
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
});
