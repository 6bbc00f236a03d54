import type { Kysely, Transaction } from 'kysely';
import { asTransaction, loadKysely } from '../sql/kysely.js';
import { watchPool } from './connection-errors.js';
import { PhaseError } from '../sql/phase-error.js';
import { runGuardedTransaction, toParams, type GuardSession } from './session.js';

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
