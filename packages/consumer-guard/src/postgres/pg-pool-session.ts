import { watchCheckout, watchPool, type CheckoutWatch } from './connection-errors.js';
import { isConnectionFailure } from './postgres-errors.js';
import { PhaseError } from '../sql/phase-error.js';
import { runGuardedTransaction, toParams, type GuardSession } from './session.js';
import type { TransactionExecutor } from '../write-context.js';

/**
 * The parts of `pg.PoolClient` the guard uses. Our own structural type, so that the guard does not
 * depend on `pg` (kysely's `PostgresPool` does the same).
 */
export interface PgClientLike {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[]; command?: string | null }>;
  /** Back to the pool; with an error, the pool destroys the client instead. */
  release(err?: boolean | Error): void;
}

/**
 * A `pg.Pool` as the guard listens to it: its `error`, `acquire` and `release` events
 * (connection-errors.ts). `any`: pg's own listener types differ per event.
 */
export interface PgPoolEvents {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  on(event: 'error' | 'acquire' | 'release', listener: (...args: any[]) => void): unknown;
}

/** The parts of `pg.Pool` the guard uses. */
export interface PgPoolLike<Client extends PgClientLike = PgClientLike> {
  connect(): Promise<Client>;
}

/**
 * The client type a pool hands out. `pg.Pool#connect` is overloaded and TypeScript infers from the
 * last overload (the callback form), so the client is read from that callback's parameter.
 */
export type PoolClientOf<P> = P extends { connect(callback: (err: never, client: infer C, ...rest: never[]) => void): void }
  ? Extract<NonNullable<C>, PgClientLike>
  : P extends PgPoolLike<infer C>
    ? C
    : PgClientLike;

export function isPgPoolLike(db: object): db is PgPoolLike {
  return typeof (db as { connect?: unknown }).connect === 'function' && typeof (db as { query?: unknown }).query === 'function';
}

/** A `pg.Pool` (not a client: a pool keeps counts of its clients). */
export function isPgPool(db: object): boolean {
  return isPgPoolLike(db) && typeof (db as { totalCount?: unknown }).totalCount === 'number';
}

/** A pg client (pooled or not) a caller opened a transaction on, as an executor: its `query` answers `{ rows }`. */
export function pgClientExecutor(tx: object): TransactionExecutor | undefined {
  const client = tx as Partial<PgClientLike>;
  if (typeof client.query !== 'function') return undefined;
  return { executeSql: (text, values) => client.query!(text, values) };
}

export function pgPoolSession<Client extends PgClientLike>(pool: PgPoolLike<Client>, onConnectionError: (err: Error) => void): GuardSession<Client> {
  // An idle client that dies emits on the pool, which throws when nothing listens there. A watched
  // pool also reports the losses of checked-out clients; each checkout below listens as well, to
  // know its own client's fate, and reports only where the pool cannot.
  const poolReports = watchPool(pool, onConnectionError);

  /**
   * Checks a client out, runs `fn` while listening for the client's errors, and hands the client
   * back: with the error when it failed at the connection rather than with an SQL error, so that the
   * pool destroys it. `onConnectError` maps a failure to check a client out.
   */
  async function withClient<T>(fn: (client: Client, watch: CheckoutWatch) => Promise<T>, onConnectError = (err: unknown): unknown => err): Promise<T> {
    let client: Client;
    try {
      client = await pool.connect();
    } catch (err) {
      throw onConnectError(err);
    }
    const watch = watchCheckout(client, poolReports ? undefined : onConnectionError);
    let broken: Error | undefined;
    try {
      return await fn(client, watch);
    } catch (err) {
      // A failed transaction was rolled back and its connection is fine, unless the connection
      // reported an error or the ROLLBACK failed too; a statement failing with a connection error
      // (postgres-errors.ts) failed at the connection.
      const failed = err instanceof PhaseError ? err.connectionBroken : isConnectionFailure(err);
      broken = watch.lost() ?? (failed ? asError(err) : undefined);
      throw err;
    } finally {
      watch.stop();
      client.release(broken ?? watch.lost());
    }
  }

  return {
    transaction: (isolation, checkSql, body, closing) =>
      withClient(
        (c, watch) =>
          runGuardedTransaction({ exec: async (text) => ({ command: lastCommand(await c.query(text)) }), lost: watch.lost }, c, isolation, checkSql, body, closing),
        (err) => new PhaseError('open', err),
      ),

    query: (statement) => withClient(async (c) => (await c.query(statement.text, toParams(statement.values))).rows as Record<string, unknown>[]),

    script: (body) =>
      withClient(async (c) => {
        await c.query('BEGIN');
        try {
          await body(async (s) => (await c.query(s.text, toParams(s.values))).rows as Record<string, unknown>[]);
          await c.query('COMMIT');
        } catch (err) {
          await c.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
      }),
  };
}

/** A multi-statement query answers with one result per statement; the last one's tag is the one we want. */
function lastCommand(result: unknown): string | undefined {
  const last = Array.isArray(result) ? result[result.length - 1] : result;
  const command = (last as { command?: unknown } | undefined)?.command;
  return typeof command === 'string' ? command : undefined;
}

function asError(err: unknown): Error {
  const cause = err instanceof PhaseError ? err.cause : err;
  return cause instanceof Error ? cause : new Error(String(cause));
}
