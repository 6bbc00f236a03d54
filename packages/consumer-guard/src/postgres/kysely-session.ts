import type { Kysely, Transaction } from 'kysely';
import { watchPool } from './connection-errors.js';
import { PhaseError, runGuardedTransaction, toParams, type GuardSession } from './session.js';

/** True for a Kysely instance (checked structurally: two copies of kysely must both work). */
export function isKyselyLike(db: object): db is Kysely<unknown> {
  const k = db as { transaction?: unknown; selectFrom?: unknown; executeQuery?: unknown; connection?: unknown };
  return (
    typeof k.transaction === 'function' &&
    typeof k.connection === 'function' &&
    typeof k.selectFrom === 'function' &&
    typeof k.executeQuery === 'function'
  );
}

// kysely is an optional peer dependency: load it only when the caller handed us a Kysely instance.
let kyselyModule: Promise<typeof import('kysely')> | undefined;
const loadKysely = () => (kyselyModule ??= import('kysely'));

const NOT_IN_GUARDED_WRITE = ['transaction', 'startTransaction', 'connection', 'destroy'];

/**
 * Kysely's `transaction()` sends BEGIN on its own, which would cost the check a round trip of its
 * own. So the guard opens the transaction itself on a connection-bound Kysely (`db.connection()`),
 * and hands `fn` that instance dressed as a `Transaction`: `isTransaction` is true, and the methods
 * a `Transaction` refuses (nested `transaction()`, `connection()`, `destroy()`) throw here too. A
 * nested BEGIN/COMMIT would otherwise commit the guarded transaction half way through.
 */
export function asTransaction<DB>(conn: Kysely<DB>): Transaction<DB> {
  return new Proxy(conn, {
    get(target, property, receiver) {
      if (property === 'isTransaction') return true;
      if (typeof property === 'string' && NOT_IN_GUARDED_WRITE.includes(property)) {
        return () => {
          throw new Error(`calling ${property}() inside guardedWrite is not supported: fn already runs in a transaction`);
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as unknown as Transaction<DB>;
}

/**
 * The guard over a Kysely instance. Kysely checks its clients out of the `pg.Pool` behind its dialect
 * and listens on none of them, so `pool` (that pool) is watched: every client of it is heard while it
 * is idle and while it is checked out (connection-errors.ts).
 */
export function kyselySession<DB>(db: Kysely<DB>, pool: object, onConnectionError: (err: Error) => void): GuardSession<Transaction<DB>> {
  watchPool(pool, onConnectionError);
  return {
    async transaction(isolation, checkSql, body, closing) {
      const { CompiledQuery } = await loadKysely();
      try {
        return await db.connection().execute((conn) =>
          runGuardedTransaction(
            {
              // Kysely answers COMMIT and ROLLBACK with a row holding the command tag.
              exec: async (text) => {
                const result = await conn.executeQuery<{ command?: string }>(CompiledQuery.raw(text, []));
                return { command: result.rows[0]?.command };
              },
            },
            asTransaction(conn),
            isolation,
            checkSql,
            body,
            closing,
          ),
        );
      } catch (err) {
        // Failing to acquire the connection happens before the transaction opens.
        throw err instanceof PhaseError ? err : new PhaseError('open', err);
      }
    },

    async query(statement) {
      const { CompiledQuery } = await loadKysely();
      const result = await db.executeQuery(CompiledQuery.raw(statement.text, toParams(statement.values)));
      return result.rows as Record<string, unknown>[];
    },

    async script(body) {
      const { CompiledQuery } = await loadKysely();
      await db.transaction().execute(async (trx) => {
        await body(async (s) => (await trx.executeQuery(CompiledQuery.raw(s.text, toParams(s.values)))).rows as Record<string, unknown>[]);
      });
    },
  };
}
