import { SchemaMissingError } from '@fenced/shared';
import { withTimeout } from '@fenced/shared/internal';

/**
 * The parts of a `pg.Pool` the lease store uses: our own structural types, so that the coordinator
 * does not depend on `pg` (kysely's `PostgresPool` does the same).
 */
export interface PgLeasePool {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
  connect(): Promise<PgLeaseClient>;
  on?(event: 'error', listener: (err: Error) => void): unknown;
}

/** A client checked out of the pool: the release listener holds one for its LISTEN. */
export interface PgLeaseClient {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
  release(err?: boolean | Error): void;
  on(event: 'error' | 'end', listener: (err?: Error) => void): unknown;
  // `| undefined` spelled out: pg's Notification has it, and under exactOptionalPropertyTypes a plain
  // pg.Pool would not fit without it.
  on(event: 'notification', listener: (message: { channel: string; payload?: string | undefined }) => void): unknown;
  removeListener(event: 'notification', listener: (message: { channel: string; payload?: string | undefined }) => void): unknown;
  removeAllListeners(event?: string): unknown;
}

export function isPgLeasePool(value: unknown): value is PgLeasePool {
  return (
    typeof value === 'object' && value !== null && typeof (value as { query?: unknown }).query === 'function' && typeof (value as { connect?: unknown }).connect === 'function'
  );
}

/** The function or table does not exist, or the schema is not this role's to use: not migrated here. */
const MISSING = new Set(['42883', '42P01', '3F000', '42501']);

/**
 * One statement through the pool, bounded by `timeoutMs`. pg-pool's own `query` listens on the
 * client for the statement's lifetime and destroys a client whose connection failed, so a killed
 * backend is this call's error, never the host's. A store that was never migrated is a typed error.
 */
export async function queryRows<Row>(pool: PgLeasePool, installation: string, text: string, values: unknown[], timeoutMs: number, operation: string): Promise<Row[]> {
  try {
    const result = await withTimeout(pool.query(text, values), timeoutMs, operation);
    return result.rows as Row[];
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && MISSING.has(code)) throw new SchemaMissingError(installation, { cause: err });
    throw err;
  }
}

const watched = new WeakSet<object>();

/**
 * An idle client whose connection dies emits `error` on its pool, and pg-pool throws it when nothing
 * listens there: the lease store listens on the pool it is given (once per pool), and reports.
 */
export function listenOnPool(pool: PgLeasePool, onError: (err: Error) => void): void {
  if (typeof pool.on !== 'function' || watched.has(pool)) return;
  watched.add(pool);
  pool.on('error', onError);
}
