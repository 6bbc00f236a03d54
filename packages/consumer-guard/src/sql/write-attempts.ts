import { isFencedError } from '@fenced/shared';
import { retryBackoff } from '../internal/retry-backoff.js';
import type { WriteArguments } from '../write-arguments.js';
import { PhaseError } from './phase-error.js';

/** How a SQL fence store tells the errors of its database apart, for {@link runWriteAttempts}. */
export interface WriteErrorRules {
  /** A transaction the database aborted on its own (a deadlock, a lock wait, a serialization failure): run it again. */
  isRetryable(cause: unknown): boolean;
  /** Called before each retry (the store reports `guard.retry` with its database's code). */
  retrying(write: WriteArguments, cause: unknown, attempt: number): void;
  /** The check's refusal as the typed error to throw (already reported), or undefined. */
  refusalOf(write: WriteArguments, cause: unknown): Error | undefined;
  /** The typed error for a database the store could not use (reported). */
  unavailable(write: WriteArguments, phase: string, cause: unknown, outcomeUnknown: boolean): Error;
  /** Called once the write committed. */
  accepted(write: WriteArguments): void;
}

/**
 * Runs a guarded transaction (`attempt`, given its number) until it commits, retrying what the
 * database aborted on its own up to `maxRetries` times; then tells every failure apart, the same way
 * on every SQL store: the check's refusal as its typed error; `fn`'s own error untouched; an error
 * `fn` met because its connection died, or any failure outside `fn`, as the store's unavailable
 * error (saying whether the commit's outcome is unknown).
 */
export async function runWriteAttempts<T>(write: WriteArguments, attempt: (n: number) => Promise<T>, rules: WriteErrorRules, maxRetries: number): Promise<T> {
  for (let n = 1; ; n++) {
    let result: T;
    try {
      result = await attempt(n);
    } catch (err) {
      const phase = err instanceof PhaseError ? err.phase : 'open';
      const cause = err instanceof PhaseError ? err.cause : err;
      if (rules.isRetryable(cause) && n <= maxRetries) {
        rules.retrying(write, cause, n);
        await retryBackoff(n);
        continue;
      }
      const refused = rules.refusalOf(write, cause);
      if (refused !== undefined) throw refused;
      const broken = err instanceof PhaseError && err.connectionBroken;
      // The caller's own errors pass through untouched; an error fn met because the connection
      // died under it is the guard's to report.
      if (phase === 'body' && !broken) throw cause;
      if (rules.isRetryable(cause) || (isFencedError(cause) && !broken)) throw cause;
      throw rules.unavailable(write, phase, cause, err instanceof PhaseError && err.outcomeUnknown);
    }
    rules.accepted(write);
    return result;
  }
}
