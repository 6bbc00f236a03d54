import { GuardUnavailableError, type FencedLogger } from '@fenced/shared';
import { emit } from '@fenced/shared/internal';

/**
 * The typed error for a database a SQL fence store could not use (reported as `guard.unavailable`):
 * the driver error as `cause`, the phase it failed in, whether anything can have been applied (only
 * a COMMIT sent on a connection that then failed leaves that unknown), and a hint when the store's
 * objects are missing (`notMigrated`, told by each store from its own error codes).
 */
export function storeUnavailable(
  logger: FencedLogger | undefined,
  database: 'PostgreSQL' | 'MySQL',
  failure: { readonly resource: string; readonly phase: string; readonly cause: unknown; readonly outcomeUnknown: boolean; readonly notMigrated: boolean },
): GuardUnavailableError {
  const { resource, phase, cause, outcomeUnknown, notMigrated } = failure;
  emit(logger, { type: 'guard.unavailable', resource, error: cause });
  const hint = notMigrated ? ' (was guard.migrate() run?)' : '';
  const outcome = outcomeUnknown ? '; the commit outcome is unknown' : '; nothing was applied';
  const message = cause instanceof Error ? cause.message : String(cause);
  return new GuardUnavailableError(`${database} guard failed during ${phase}${outcome}: ${message}${hint}`, { cause });
}
