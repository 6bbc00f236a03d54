// Error numbers the MySQL store branches on: MySQL and MariaDB share these (the server's errno, which
// mysql2 puts on `err.errno`). Never branch on message text.

/** Raised by the check procedure: the token is below the fence. MESSAGE_TEXT holds the fence. */
export const STALE_TOKEN = 45001;
/** Raised by the advance procedure: the fence already holds the token or more. MESSAGE_TEXT holds the fence. */
export const FENCE_AHEAD = 45002;
/** Raised by the check procedure: this resource already applied the fire id. */
export const DUPLICATE_FIRE = 45003;
/** Raised by the lease check: the lease is not held by the write's token. MESSAGE_TEXT holds the lease's token, or ''. */
export const LEASE_NOT_HELD = 45004;
/** ER_LOCK_DEADLOCK: InnoDB broke a deadlock by rolling this transaction back. */
export const LOCK_DEADLOCK = 1213;
/** ER_LOCK_WAIT_TIMEOUT: a lock wait passed `innodb_lock_wait_timeout` (only the statement rolled back). */
export const LOCK_WAIT_TIMEOUT = 1205;
/** ER_DUP_ENTRY: two first advances of one resource inserted its row at once (READ COMMITTED). */
export const DUPLICATE_ENTRY = 1062;
/** ER_NO_SUCH_TABLE / ER_SP_DOES_NOT_EXIST: the store was not migrated. */
export const NO_SUCH_TABLE = 1146;
export const NO_SUCH_PROCEDURE = 1305;
/** An unknown savepoint has the same number (ER_SP_DOES_NOT_EXIST, 'SAVEPOINT … does not exist'). */
export const SAVEPOINT_DOES_NOT_EXIST = NO_SUCH_PROCEDURE;
/** ER_QUERY_INTERRUPTED (MySQL 3024 ER_QUERY_TIMEOUT, MariaDB 1969 ER_STATEMENT_TIMEOUT). */
export const STATEMENT_TIMEOUTS = new Set([3024, 1969, 1317]);
/** ER_CON_COUNT_ERROR, ER_SERVER_SHUTDOWN, ER_CONNECTION_KILLED and their kin: the session is gone. */
const SESSION_ENDED = new Set([1040, 1053, 1927, 2006, 2013, 4031]);

/** The server's error number of a driver error, if it carries one. */
export function errnoOf(err: unknown): number | undefined {
  const errno = (err as { errno?: unknown } | null)?.errno;
  return typeof errno === 'number' && Number.isInteger(errno) ? errno : undefined;
}

/** The MESSAGE_TEXT of a refusal the procedures raised: a fence, in decimal digits. */
export function fenceInRefusal(err: unknown): string | undefined {
  const text = (err as { sqlMessage?: unknown } | null)?.sqlMessage;
  return typeof text === 'string' && /^\d{1,19}$/.test(text) ? text : undefined;
}

/** True for errors after which running the whole transaction again is the documented remedy. */
export function isRetryable(err: unknown): boolean {
  const errno = errnoOf(err);
  return errno === LOCK_DEADLOCK || errno === LOCK_WAIT_TIMEOUT;
}

/**
 * True for an error that says the connection itself is gone, not that a statement failed: a fatal
 * driver error (mysql2 marks those `fatal`: the socket closed, the server ended the session), or a
 * server error that ends the session.
 */
export function isConnectionFailure(err: unknown): boolean {
  if ((err as { fatal?: unknown } | null)?.fatal === true) return true;
  const errno = errnoOf(err);
  return errno === undefined || SESSION_ENDED.has(errno);
}

/** Whether the error says the store's tables or procedures are missing. */
export function isNotMigrated(err: unknown): boolean {
  const errno = errnoOf(err);
  return errno === NO_SUCH_TABLE || errno === NO_SUCH_PROCEDURE;
}

/**
 * A refusal the guard decided itself, on the check's shared path (statements/read-fence-shared.sql),
 * shaped as the procedure's SIGNAL is (`errno`, `sqlMessage`), so that one mapper turns both into
 * the typed errors.
 */
export class CheckRefusal extends Error {
  override readonly name = 'CheckRefusal';
  constructor(
    readonly errno: number,
    readonly sqlMessage: string,
  ) {
    super(`fence check refused the write (${errno})`);
  }
}
