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
  /**
   * With a fire id: the text to record beside the fire's claim, from what `fn` returned, written in
   * the same transaction before it commits (read back by `appliedOutcome`). Its error aborts the
   * write like one of `fn`'s own.
   */
  readonly recordOutcome?: (result: unknown) => string;
}

/**
 * The edge of a public `guardedWrite`: the caller's token parsed (once; below here it is a `Token`),
 * the resource and fire id checked by their rules, `fn` checked to be a function, all before any
 * database call, so bad input changes nothing.
 */
export function parseWriteArguments<T>(caller: string, tokenInput: TokenInput, fn: unknown, options: GuardedWriteOptions<T> | undefined, defaultResource: string): WriteArguments {
  const token = parseToken(tokenInput);
  const resource = options?.resource === undefined ? defaultResource : parseResource(options.resource);
  if (typeof fn !== 'function') throw new TypeError(`${caller}: fn must be a function`);
  const fireId = options?.fireId === undefined ? null : parseFireIdText(options.fireId);
  const issuer = options?.issuer === undefined ? null : parseIssuerText(options.issuer);
  const recordOutcome = options?.recordOutcome;
  if (recordOutcome === undefined) return { token, resource, fireId, issuer };
  if (typeof recordOutcome !== 'function') throw new TypeError(`${caller}: recordOutcome must be a function`);
  if (fireId === null) throw new TypeError(`${caller}: recordOutcome records beside a fire's claim: give fireId too`);
  return { token, resource, fireId, issuer, recordOutcome: recordOutcome as (result: unknown) => string };
}

/**
 * A fire's write through the handler's port: its token, fire id and issuer come from an envelope
 * already validated, the resource is the guard's own, so nothing is parsed again.
 */
export function fireWriteArguments<T>(token: Token, resource: string, fireId: string, issuer: string | undefined, recordOutcome: ((result: T) => string) | undefined): WriteArguments {
  const args = { token, resource, fireId, issuer: issuer ?? null };
  return recordOutcome === undefined ? args : { ...args, recordOutcome: recordOutcome as (result: unknown) => string };
}

/**
 * The fire ids of a question about applied fires, each checked by the envelope's rule before any
 * database call.
 *
 * @throws {InvalidEnvelopeError} for a fire id the envelope would refuse; TypeError for a non-array.
 */
export function parseFireIds(fireIds: unknown): string[] {
  if (!Array.isArray(fireIds)) throw new TypeError('appliedFireIds: pass an array of fire ids');
  return fireIds.map((fireId) => parseFireIdText(fireId));
}
