import { InvalidTokenError } from './errors.js';

import type { Token, TokenInput } from './token-type.js';

export type { Token, TokenInput } from './token-type.js';

/** The smallest valid token. */
export const MIN_TOKEN = 1n as Token;
/** The largest valid token: PostgreSQL's `bigint` maximum, 2^63-1. */
export const MAX_TOKEN = (2n ** 63n - 1n) as Token;

// Canonical form only: no sign, no leading zeros, no exponent, no whitespace. Lua compares tokens
// as strings (length first, then bytes), which is only an order on canonical decimals.
const CANONICAL_DECIMAL = /^[1-9][0-9]*$/;

/**
 * Parses a token from untrusted input.
 * Accepts a bigint, a safe-integer number, or a canonical decimal string, each within 1..2^63-1.
 *
 * @throws {InvalidTokenError} for anything else (zero, negatives, fractions, NaN, `"12abc"`, `"1e3"`,
 * numbers past 2^53, strings past 2^63-1, objects).
 * @example
 * ```ts
 * parseToken('9223372036854775807') // 9223372036854775807n
 * ```
 */
export function parseToken(input: unknown): Token {
  let value: bigint;
  if (typeof input === 'bigint') {
    value = input;
  } else if (typeof input === 'number') {
    if (!Number.isSafeInteger(input)) {
      throw new InvalidTokenError(input, `number ${input} is not a safe integer (use a bigint or a decimal string)`);
    }
    value = BigInt(input);
  } else if (typeof input === 'string') {
    if (input.length > 19 || !CANONICAL_DECIMAL.test(input)) {
      throw new InvalidTokenError(input, `${JSON.stringify(input.slice(0, 40))} is not a canonical decimal in 1..2^63-1`);
    }
    value = BigInt(input);
  } else {
    throw new InvalidTokenError(input, `expected bigint, number or decimal string, got ${describe(input)}`);
  }
  if (value < MIN_TOKEN || value > MAX_TOKEN) {
    throw new InvalidTokenError(input, `${value} is outside 1..2^63-1`);
  }
  return value as Token;
}

/**
 * A token read back from one of fenced's own stores (a fence row, a Redis mark, a script's reply):
 * the canonical decimal the store holds, checked as strictly as `parseToken` checks input (a store
 * that answers garbage is refused, not trusted). Separate from `parseToken` so that parsing a
 * caller's token stays countable: it happens once, at the edge.
 *
 * @throws {InvalidTokenError} for anything but a canonical decimal in 1..2^63-1.
 */
export function storedToken(text: string): Token {
  if (text.length > 19 || !CANONICAL_DECIMAL.test(text)) {
    throw new InvalidTokenError(text, `the store answered ${JSON.stringify(String(text).slice(0, 40))}, not a canonical decimal in 1..2^63-1`);
  }
  const value = BigInt(text);
  if (value > MAX_TOKEN) throw new InvalidTokenError(text, `the store answered ${value}, outside 1..2^63-1`);
  return value as Token;
}

/** True when `input` would parse as a token. */
export function isToken(input: unknown): input is TokenInput {
  try {
    parseToken(input);
    return true;
  } catch {
    return false;
  }
}

/** The canonical decimal form of a token, as it travels on the wire and in Lua (no parse: a `Token` is valid). */
export function formatToken(token: Token): string {
  return token.toString();
}

function describe(input: unknown): string {
  if (input === null) return 'null';
  if (Array.isArray(input)) return 'array';
  return typeof input;
}
