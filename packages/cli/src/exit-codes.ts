/**
 * The exit codes of `fenced`, for scripts and deploy gates (also printed by `fenced --help`).
 */
export const ExitCode = {
  /** Done; for `doctor`: no check failed (warnings allowed). */
  OK: 0,
  /** `doctor`: at least one check failed. `fence show`: the resource has no fence. */
  FAILED: 1,
  /** Bad usage or input: an unknown option, a malformed URL or token, a refused admin act; nothing was changed. */
  USAGE: 2,
  /** A service could not be reached (Redis or PostgreSQL); nothing was changed. */
  UNREACHABLE: 3,
} as const;

export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** An error that ends the command with a given exit code and a one-line message. */
export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(
    readonly exitCode: ExitCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
