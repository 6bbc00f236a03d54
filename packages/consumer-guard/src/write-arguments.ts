import { parseFireIdText, parseIssuerText, parseResource, parseToken, type Token, type TokenInput } from '@fenced/shared';
import type { GuardedWriteOptions } from './write-context.js';

/** A guarded write's arguments once validated: what every layer below a public entry point takes. */
export interface WriteArguments {
  readonly token: Token;
  readonly resource: string;
  /** The fire to claim in the write's transaction, or null. */
  readonly fireId: string | null;
  /** The node the token was issued to, for a lease check that compares the holder too; or null. */
  readonly issuer: string | null;
}

/**
 * The edge of a public `guardedWrite`: the caller's token parsed (once; below here it is a `Token`),
 * the resource and fire id checked by their rules, `fn` checked to be a function, all before any
 * database call, so bad input changes nothing.
 */
export function parseWriteArguments(caller: string, tokenInput: TokenInput, fn: unknown, options: GuardedWriteOptions | undefined, defaultResource: string): WriteArguments {
  const token = parseToken(tokenInput);
  const resource = options?.resource === undefined ? defaultResource : parseResource(options.resource);
  if (typeof fn !== 'function') throw new TypeError(`${caller}: fn must be a function`);
  const fireId = options?.fireId === undefined ? null : parseFireIdText(options.fireId);
  const issuer = options?.issuer === undefined ? null : parseIssuerText(options.issuer);
  return { token, resource, fireId, issuer };
}
