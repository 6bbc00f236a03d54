import type { Token } from './token-type.js';
/**
 * Typed errors with stable codes. Identify them with {@link isFencedError}, never by message text
 * and never with `instanceof` alone: two copies of `@fenced/shared` in one process would not share
 * classes, but they share the `Symbol.for` brand.
 */

const FENCED_ERROR_BRAND = Symbol.for('fenced.error');

/** Stable error codes. They are part of the public API: never renamed, never reused. */
export const FencedErrorCode = {
  /** A write carried a token lower than the highest already committed for its resource. */
  STALE_TOKEN: 'STALE_TOKEN',
  /** A token was not an integer in 1..2^63-1 (bigint, safe-integer number, or canonical decimal string). */
  INVALID_TOKEN: 'INVALID_TOKEN',
  /** The guard's store (PostgreSQL) could not be reached or failed; nothing was applied. */
  GUARD_UNAVAILABLE: 'GUARD_UNAVAILABLE',
  /** A factory was given options that do not validate; the zod issues are attached. */
  INVALID_CONFIG: 'INVALID_CONFIG',
  /** A resource name is empty, too long, or contains a NUL character. */
  INVALID_RESOURCE: 'INVALID_RESOURCE',
  /** A task envelope did not validate against the shared schema; the zod issues are attached. */
  INVALID_ENVELOPE: 'INVALID_ENVELOPE',
  /**
   * A strict fence advance found the fence already at (or above) the new token: the token source
   * regressed (for example Redis lost its counter) and the token must not be used.
   */
  FENCE_AHEAD: 'FENCE_AHEAD',
  /** An operation that needs leadership ran on a node that does not (or no longer) lead. */
  NOT_LEADER: 'NOT_LEADER',
  /**
   * An envelope was unsigned while the guard requires signatures, named an unknown key id, or its
   * signature did not match its contents. Nothing was considered, let alone applied.
   */
  BAD_SIGNATURE: 'BAD_SIGNATURE',
  /** This resource already applied that fire id: a second dispatch of one fire changes nothing. */
  DUPLICATE_FIRE: 'DUPLICATE_FIRE',
  /**
   * The database's guard objects were migrated by a newer version of fenced than the one running:
   * this version refuses to touch them (deploy the newer version everywhere, or restore the schema).
   */
  SCHEMA_TOO_NEW: 'SCHEMA_TOO_NEW',
  /** The database has no fenced objects here (or older ones than this version needs): run `migrate()` first. */
  SCHEMA_MISSING: 'SCHEMA_MISSING',
  /**
   * A guarded Redis write was refused before it was sent: a command that cannot run fenced, a bad key,
   * or (on Redis Cluster) a key outside the slot of the resource's mark.
   */
  INVALID_MUTATION: 'INVALID_MUTATION',
  /**
   * The lease store (etcd) could not answer: unreachable, without a quorum, refusing the client's
   * TLS or credentials, or slower than the request's deadline. `reason` says which; nothing was
   * half-written, and a leader that cannot renew ends its term by its own deadline.
   */
  LEASE_STORE_UNAVAILABLE: 'LEASE_STORE_UNAVAILABLE',
  /**
   * A fire's handler gave the fire up on purpose (`throw new FireGivenUpError(reason)`): the scheduler
   * does not dispatch it again, and reports it (`fire.given-up`, a metric) instead of retrying it.
   */
  FIRE_GIVEN_UP: 'FIRE_GIVEN_UP',
} as const;

export type FencedErrorCode = (typeof FencedErrorCode)[keyof typeof FencedErrorCode];

/** Base class of every error the fenced packages throw on purpose. */
export class FencedError extends Error {
  override readonly name: string = 'FencedError';
  readonly [FENCED_ERROR_BRAND] = true;
  readonly code: FencedErrorCode;

  constructor(code: FencedErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * The error class behind each code: `isFencedError(err, code)` narrows to it, so the fields of that
 * error (`highest` of a stale token, `issues` of a bad envelope, …) need no cast.
 */
export interface FencedErrorByCode {
  STALE_TOKEN: StaleTokenError;
  INVALID_TOKEN: InvalidTokenError;
  GUARD_UNAVAILABLE: GuardUnavailableError;
  INVALID_CONFIG: ConfigError;
  INVALID_RESOURCE: InvalidResourceError;
  INVALID_ENVELOPE: InvalidEnvelopeError;
  FENCE_AHEAD: FenceAheadError;
  NOT_LEADER: NotLeaderError;
  BAD_SIGNATURE: EnvelopeSignatureError;
  DUPLICATE_FIRE: DuplicateFireError;
  SCHEMA_TOO_NEW: SchemaTooNewError;
  SCHEMA_MISSING: SchemaMissingError;
  INVALID_MUTATION: InvalidMutationError;
  LEASE_STORE_UNAVAILABLE: LeaseStoreUnavailableError;
  FIRE_GIVEN_UP: FireGivenUpError;
}

// Every code has its class: adding a code without one fails to compile here.
type MissingClasses = Exclude<FencedErrorCode, keyof FencedErrorByCode>;
const everyCodeHasAClass: [MissingClasses] extends [never] ? true : MissingClasses = true;
void everyCodeHasAClass;

/**
 * True when `err` is a fenced error (from any copy of this package), optionally with the given code;
 * with a code, it narrows to that code's class.
 *
 * @example
 * ```ts
 * try { await guard.guardedWrite(token, fn) }
 * catch (err) { if (isFencedError(err, 'STALE_TOKEN')) return log.info({ highest: err.highest }); throw err }
 * ```
 */
export function isFencedError(err: unknown): err is FencedError;
export function isFencedError<C extends FencedErrorCode>(err: unknown, code: C): err is FencedErrorByCode[C];
export function isFencedError(err: unknown, code?: FencedErrorCode): boolean {
  if (typeof err !== 'object' || err === null) return false;
  if ((err as Record<symbol, unknown>)[FENCED_ERROR_BRAND] !== true) return false;
  return code === undefined || (err as FencedError).code === code;
}

/** A mutation carried a token below the committed fence of its resource; nothing was applied. */
export class StaleTokenError extends FencedError {
  override readonly name = 'StaleTokenError';
  constructor(
    readonly resource: string,
    readonly token: Token,
    readonly highest: Token,
  ) {
    super(
      FencedErrorCode.STALE_TOKEN,
      `stale fencing token ${token} for resource ${JSON.stringify(resource)}: highest committed is ${highest}`,
    );
  }
}

/** A token was malformed or out of range. */
export class InvalidTokenError extends FencedError {
  override readonly name = 'InvalidTokenError';
  constructor(readonly input: unknown, reason: string) {
    super(FencedErrorCode.INVALID_TOKEN, `invalid fencing token: ${reason}`);
  }
}

/** The guard's store failed or could not be reached. `cause` holds the driver error. */
export class GuardUnavailableError extends FencedError {
  override readonly name = 'GuardUnavailableError';
  constructor(message: string, options: { cause: unknown }) {
    super(FencedErrorCode.GUARD_UNAVAILABLE, message, options);
  }
}

/** Why a lease store could not answer (see `LEASE_STORE_UNAVAILABLE`). */
export type LeaseStoreFailure = 'unreachable' | 'no-quorum' | 'tls' | 'auth' | 'timeout' | 'failed';

/** The lease store could not answer. `cause` holds the driver error. */
export class LeaseStoreUnavailableError extends FencedError {
  override readonly name = 'LeaseStoreUnavailableError';
  constructor(
    readonly store: string,
    readonly reason: LeaseStoreFailure,
    message: string,
    options: { cause: unknown },
  ) {
    super(FencedErrorCode.LEASE_STORE_UNAVAILABLE, `${store}: ${message}`, options);
  }
}

/** One validation problem, flattened from zod so callers need not depend on zod's types. */
export interface ValidationIssue {
  /** Dotted path of the offending field, `''` for the root. */
  readonly path: string;
  readonly message: string;
}

/** Options passed to a factory did not validate. */
export class ConfigError extends FencedError {
  override readonly name = 'ConfigError';
  constructor(
    readonly component: string,
    readonly issues: readonly ValidationIssue[],
  ) {
    super(FencedErrorCode.INVALID_CONFIG, `invalid ${component} options: ${formatIssues(issues)}`);
  }
}

/** A resource name was rejected. */
export class InvalidResourceError extends FencedError {
  override readonly name = 'InvalidResourceError';
  constructor(reason: string) {
    super(FencedErrorCode.INVALID_RESOURCE, `invalid resource name: ${reason}`);
  }
}

/** A task envelope did not validate. `issues` names each offending field. */
export class InvalidEnvelopeError extends FencedError {
  override readonly name = 'InvalidEnvelopeError';
  constructor(readonly issues: readonly ValidationIssue[]) {
    super(FencedErrorCode.INVALID_ENVELOPE, `invalid task envelope: ${formatIssues(issues)}`);
  }
}

/** A strict advance found the fence already at or above the token: the token source regressed. */
export class FenceAheadError extends FencedError {
  override readonly name = 'FenceAheadError';
  constructor(
    readonly resource: string,
    readonly token: Token,
    readonly highest: Token,
  ) {
    super(
      FencedErrorCode.FENCE_AHEAD,
      `fence for resource ${JSON.stringify(resource)} is already at ${highest}, not below ${token}: the token source regressed`,
    );
  }
}

/** Leadership was required and this node does not hold it (or its local deadline passed). */
export class NotLeaderError extends FencedError {
  override readonly name = 'NotLeaderError';
  constructor(readonly lease: string, reason: string) {
    super(FencedErrorCode.NOT_LEADER, `not the leader of ${JSON.stringify(lease)}: ${reason}`);
  }
}

/** The fire was already applied to this resource; the transaction was rolled back untouched. */
export class DuplicateFireError extends FencedError {
  override readonly name = 'DuplicateFireError';
  constructor(
    readonly resource: string,
    readonly fireId: string,
  ) {
    super(FencedErrorCode.DUPLICATE_FIRE, `fire ${JSON.stringify(fireId)} was already applied to resource ${JSON.stringify(resource)}`);
  }
}

/** `migrate()` found the installation at a migration newer than this version knows; nothing was changed. */
export class SchemaTooNewError extends FencedError {
  override readonly name = 'SchemaTooNewError';
  constructor(
    readonly installation: string,
    readonly databaseRevision: number,
    readonly supportedRevision: number,
  ) {
    super(
      FencedErrorCode.SCHEMA_TOO_NEW,
      `the fenced objects of ${installation} are at migration ${databaseRevision}, but this version of fenced knows migrations up to ${supportedRevision}: run the newer version, not this one`,
    );
  }
}

/** A store was asked before `migrate()` created its objects (or the role cannot see them); nothing was changed. */
export class SchemaMissingError extends FencedError {
  override readonly name = 'SchemaMissingError';
  constructor(
    readonly installation: string,
    options?: { cause?: unknown },
  ) {
    super(FencedErrorCode.SCHEMA_MISSING, `the fenced objects of ${installation} are missing or out of reach: run migrate() first (and grant this role USAGE on the schema)`, options);
  }
}

/** A guarded Redis write that was refused before any round trip; nothing was sent, nothing applied. */
export class InvalidMutationError extends FencedError {
  override readonly name = 'InvalidMutationError';
  constructor(
    readonly reason: 'forbidden-command' | 'bad-key' | 'cross-slot',
    detail: string,
  ) {
    super(FencedErrorCode.INVALID_MUTATION, `guarded Redis write refused: ${detail}`);
  }
}

/** An envelope's signature is missing, from an unknown key, or does not match. */
export class EnvelopeSignatureError extends FencedError {
  override readonly name = 'EnvelopeSignatureError';
  constructor(
    readonly reason: 'unsigned' | 'unknown-key' | 'mismatch',
    readonly kid: string | undefined,
  ) {
    super(FencedErrorCode.BAD_SIGNATURE, `envelope refused: ${reason === 'unsigned' ? 'not signed' : reason === 'unknown-key' ? `unknown key id ${JSON.stringify(kid)}` : 'signature does not match'}`);
  }
}

/**
 * Thrown by a fire's handler to give the fire up: the scheduler stops retrying it, records it as
 * settled (the job's later fires go on) and reports it as `fire.given-up`. Anything else a handler
 * throws is retried.
 *
 * @example
 * ```ts
 * if (customer === null) throw new FireGivenUpError('the customer was deleted');
 * ```
 */
export class FireGivenUpError extends FencedError {
  override readonly name = 'FireGivenUpError';
  constructor(
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(FencedErrorCode.FIRE_GIVEN_UP, `fire given up: ${reason}`, options);
  }
}

function formatIssues(issues: readonly ValidationIssue[]): string {
  return issues.map((i) => (i.path === '' ? i.message : `${i.path}: ${i.message}`)).join('; ');
}
