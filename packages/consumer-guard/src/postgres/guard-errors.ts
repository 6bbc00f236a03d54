import { GuardUnavailableError, type FencedLogger } from '@fenced/shared';
import { emit } from '@fenced/shared/internal';
import { sqlStateOf, UNDEFINED_FUNCTION, UNDEFINED_TABLE } from './sql-state.js';

/**
 * The typed error for a database the guard could not use: the driver error as `cause`, the phase it
 * failed in, whether anything can have been applied (only a COMMIT sent on a connection that then
 * failed leaves that unknown), and a
 * hint when the guard's objects are missing.
 */
export function guardUnavailable(logger: FencedLogger | undefined, resource: string, phase: string, cause: unknown, outcomeUnknown = false): GuardUnavailableError {
  emit(logger, { type: 'guard.unavailable', resource, error: cause });
  const state = sqlStateOf(cause);
  const hint = state === UNDEFINED_FUNCTION || state === UNDEFINED_TABLE ? ' (was guard.migrate() run?)' : '';
  const outcome = outcomeUnknown ? '; the commit outcome is unknown' : '; nothing was applied';
  const message = cause instanceof Error ? cause.message : String(cause);
  return new GuardUnavailableError(`PostgreSQL guard failed during ${phase}${outcome}: ${message}${hint}`, { cause });
}
