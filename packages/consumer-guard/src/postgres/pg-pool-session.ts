import { runGuardedTransaction, PhaseError, toParams, type GuardSession } from './session.js';

/**
 * The parts of `pg.PoolClient` the guard uses. Our own structural type, so that the guard does not
 * depend on `pg` (kysely's `PostgresPool` does the same).
 */
export interface PgClientLike {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[]; command?: string | null }>;
  release(destroy?: boolean | Error): void;
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

export function pgPoolSession<Client extends PgClientLike>(pool: PgPoolLike<Client>): GuardSession<Client> {
  /**
   * Checks a client out, runs `fn`, and hands the client back (destroyed when it failed at the
   * socket rather than with an SQL error). `onConnectError` maps a failure to check a client out.
   */
  async function withClient<T>(fn: (client: Client) => Promise<T>, onConnectError = (err: unknown): unknown => err): Promise<T> {
    let client: Client;
    try {
      client = await pool.connect();
    } catch (err) {
      throw onConnectError(err);
    }
    let destroy = false;
    try {
      return await fn(client);
    } catch (err) {
      // A failed transaction was rolled back and its connection is fine, unless the ROLLBACK failed
      // too; any other error without an SQLSTATE came from the socket.
      destroy = err instanceof PhaseError ? err.connectionBroken : !hasSqlState(err);
      throw err;
    } finally {
      client.release(destroy);
    }
  }

  return {
    transaction: (isolation, checkSql, body) =>
      withClient(
        (c) => runGuardedTransaction({ exec: async (text) => ({ command: lastCommand(await c.query(text)) }) }, c, isolation, checkSql, body),
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

function hasSqlState(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
}
