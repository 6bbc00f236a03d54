import { SchemaMissingError } from '@fenced/shared';
import { mysqlRowsOf, withTimeout, type MysqlPooledConnection } from '@fenced/shared/internal';

/**
 * The parts of a mysql2 promise pool (`mysql2/promise`'s `createPool`) the lease store uses: our
 * own structural types, so that the coordinator does not depend on mysql2.
 */
export interface MysqlLeasePool {
  query(sql: string, values?: unknown): Promise<[unknown, unknown]>;
  getConnection(): Promise<MysqlLeaseConnection>;
}

/** A connection checked out of the pool (the migrator holds one for its named lock). */
export type MysqlLeaseConnection = MysqlPooledConnection;

export function isMysqlLeasePool(value: unknown): value is MysqlLeasePool {
  const p = value as { query?: unknown; getConnection?: unknown; execute?: unknown } | null;
  return typeof value === 'object' && p !== null && typeof p.query === 'function' && typeof p.getConnection === 'function' && typeof p.execute === 'function';
}

export type MysqlRow = Record<string, unknown>;

/** ER_NO_SUCH_TABLE, ER_SP_DOES_NOT_EXIST, ER_BAD_DB_ERROR: not migrated here. */
const MISSING = new Set([1146, 1305, 1049]);
/** ER_LOCK_DEADLOCK: InnoDB rolled the whole transaction back, so running it again is safe. */
const DEADLOCK = 1213;
const DEADLOCK_ATTEMPTS = 3;

/**
 * Whether a statement that failed with `err` is sent again: a deadlock (InnoDB rolled the whole
 * transaction back), up to three attempts in all. A store that was never migrated is a typed error.
 * @throws {SchemaMissingError} when the store's tables or procedures are missing.
 */
export function runAgain(err: unknown, attempt: number, installation: string): boolean {
  const errno = errnoOf(err);
  if (errno !== undefined && MISSING.has(errno)) throw new SchemaMissingError(installation, { cause: err });
  return errno === DEADLOCK && attempt < DEADLOCK_ATTEMPTS;
}

export function errnoOf(err: unknown): number | undefined {
  const errno = (err as { errno?: unknown } | null)?.errno;
  return typeof errno === 'number' ? errno : undefined;
}

/**
 * One statement through the pool, bounded by `timeoutMs` in all. Every statement the store sends is
 * one procedure call or one statement in its own transaction, so a deadlock (the server rolled it
 * back whole) is sent again, up to three times. A store that was never migrated is a typed error.
 */
export async function queryRows(pool: MysqlLeasePool, installation: string, sql: string, values: readonly unknown[], timeoutMs: number, operation: string): Promise<MysqlRow[]> {
  const deadline = performance.now() + timeoutMs;
  for (let attempt = 1; ; attempt++) {
    try {
      const [result] = await withTimeout(pool.query(sql, values), Math.max(1, deadline - performance.now()), operation);
      return mysqlRowsOf(result);
    } catch (err) {
      if (!runAgain(err, attempt, installation) || performance.now() >= deadline) throw err;
    }
  }
}
