/**
 * Structured events the fenced packages report. The library never writes to the console: pass a
 * logger function and route events wherever you like.
 *
 * @example
 * ```ts
 * import pino from 'pino';
 * const log = pino();
 * createPostgresGuard({ db, resource: 'billing', logger: (e) => log.info(e, e.type) });
 * ```
 */
export type FencedEvent =
  | { type: 'token.accepted'; resource: string; token: bigint }
  | { type: 'token.rejected'; resource: string; token: bigint; highest: bigint; via: 'postgres' | 'redis' }
  | { type: 'fence.advanced'; resource: string; token: bigint }
  | { type: 'guard.retry'; resource: string; token: bigint; sqlstate: string; attempt: number }
  | { type: 'guard.unavailable'; resource: string; error: unknown }
  | { type: 'migration.applied'; schema: string; table: string; id: number };

/** Receives events. Must not throw; if it does, the error is swallowed so it cannot break a write. */
export type FencedLogger = (event: FencedEvent) => void;

/** Calls `logger` with `event`, shielding the caller from a logger that throws. */
export function emit(logger: FencedLogger | undefined, event: FencedEvent): void {
  if (logger === undefined) return;
  try {
    logger(event);
  } catch {
    // A broken logger must never turn an applied write into a reported failure.
  }
}
