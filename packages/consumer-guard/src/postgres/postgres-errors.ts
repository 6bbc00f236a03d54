/** SQLSTATEs the guard branches on. Never branch on message text. */

/** Raised by the check function: the token is below the fence. DETAIL holds the fence. */
export const STALE_TOKEN = 'FN001';
/** Raised by the strict advance: the fence already holds the token or more. DETAIL holds the fence. */
export const FENCE_AHEAD = 'FN002';
/** Raised by the check function: this resource already applied the fire id. */
export const DUPLICATE_FIRE = 'FN003';
/** Raised by the lease-checked check: the token's lease is no longer held by it. DETAIL holds the lease's token. */
export const LEASE_NOT_HELD = 'FN004';
/** The database broke a deadlock by aborting this transaction. */
export const DEADLOCK_DETECTED = '40P01';
/** REPEATABLE READ / SERIALIZABLE could not serialize this transaction. */
export const SERIALIZATION_FAILURE = '40001';
/** The function or table does not exist: the guard was not migrated. */
export const UNDEFINED_FUNCTION = '42883';
export const UNDEFINED_TABLE = '42P01';

/** The SQLSTATE of a driver error, if it carries one. */
export function sqlStateOf(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** The DETAIL field of a driver error. */
export function detailOf(err: unknown): string | undefined {
  const detail = (err as { detail?: unknown } | null)?.detail;
  return typeof detail === 'string' ? detail : undefined;
}

/** The guard's objects are missing (its check function or a table): the store was never migrated. */
export function isNotMigrated(err: unknown): boolean {
  const state = sqlStateOf(err);
  return state === UNDEFINED_FUNCTION || state === UNDEFINED_TABLE;
}

/** True for errors after which running the whole transaction again is the documented remedy. */
export function isRetryable(err: unknown): boolean {
  const state = sqlStateOf(err);
  return state === DEADLOCK_DETECTED || state === SERIALIZATION_FAILURE;
}

/**
 * True for an error that says the connection itself is gone, not that a statement failed: no SQLSTATE
 * at all (the socket closed, the client refused to send), class 08 (connection exception), or the
 * server ending the session (57P01 admin shutdown or pg_terminate_backend, 57P02 crash shutdown,
 * 57P03 cannot connect now, 57P05 idle session timeout). A session ended by
 * idle_in_transaction_session_timeout reports 25P03.
 */
export function isConnectionFailure(err: unknown): boolean {
  const state = sqlStateOf(err);
  return state === undefined || state.startsWith('08') || state.startsWith('57P') || state === IDLE_IN_TRANSACTION_TIMEOUT;
}

/** The server ended a session that stayed idle inside a transaction for too long. */
export const IDLE_IN_TRANSACTION_TIMEOUT = '25P03';
