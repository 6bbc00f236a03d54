/** SQLSTATEs the guard branches on. Never branch on message text. */

/** Raised by the check function: the token is below the fence. DETAIL holds the fence. */
export const STALE_TOKEN = 'FN001';
/** Raised by the strict advance: the fence already holds the token or more. DETAIL holds the fence. */
export const FENCE_AHEAD = 'FN002';
/** Raised by the check function: this resource already applied the fire id. */
export const DUPLICATE_FIRE = 'FN003';
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

/** True for errors after which running the whole transaction again is the documented remedy. */
export function isRetryable(err: unknown): boolean {
  const state = sqlStateOf(err);
  return state === DEADLOCK_DETECTED || state === SERIALIZATION_FAILURE;
}
