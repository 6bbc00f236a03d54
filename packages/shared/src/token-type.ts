// The token's type in a module of its own: the errors carry tokens and the parser throws errors, so
// both import this one rather than each other.

declare const validated: unique symbol;

/**
 * A fencing token: an integer in 1..2^63-1 that only grows from one election to the next.
 * A `bigint` at run time (JS numbers lose precision past 2^53), a canonical decimal string on the
 * wire and in Lua, and `bigint` in PostgreSQL.
 *
 * Branded: only the parsers in token.ts make one, so a value typed `Token` has been validated, and
 * the layers below the edge where it arrived take it as it is instead of parsing it again. A plain
 * `bigint` (or a sum such as `token + 1n`) is not a `Token` until it goes through `parseToken`.
 */
export type Token = bigint & { readonly [validated]: true };

/** A token as callers may pass it to a public entry point, which parses it once with `parseToken`. */
export type TokenInput = bigint | number | string;

