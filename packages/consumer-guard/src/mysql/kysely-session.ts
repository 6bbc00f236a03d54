import type { Kysely, Transaction } from 'kysely';
import { asTransaction, loadKysely } from '../sql/kysely.js';
import type { MysqlSession, Row } from './session.js';


/** A mysql2 pool as an EventEmitter of its new connections (the callback pool MysqlDialect takes). */
interface Mysql2PoolEvents {
  on(event: 'connection', listener: (connection: { on(event: 'error', listener: (err: Error) => void): unknown }) => void): unknown;
}

const watched = new WeakSet<object>();

/**
 * Listens for `error` on every connection of `pool`, for the connection's whole life: Kysely checks
 * connections out of the mysql2 pool and listens on none of them, and mysql2's own listener goes
 * after the first error. Connections the pool opened before the guard existed are found through the
 * pool's list of them, where mysql2 keeps one. Once per pool.
 */
export function watchMysqlPool(pool: object, onConnectionError: (err: Error) => void): void {
  if (watched.has(pool)) return;
  watched.add(pool);
  const listen = (connection: { on(event: 'error', listener: (err: Error) => void): unknown }) => connection.on('error', onConnectionError);
  (pool as Mysql2PoolEvents).on('connection', listen);
  const existing = (pool as { _allConnections?: { toArray?: () => unknown[] } })._allConnections?.toArray?.() ?? [];
  for (const connection of existing) listen(connection as Parameters<typeof listen>[0]);
}

/**
 * The store over a Kysely instance (MysqlDialect). The guard opens the transaction itself on a
 * connection-bound Kysely (`db.connection()`) and hands `fn` that instance dressed as a `Transaction`
 * (see the PostgreSQL session for why: a nested BEGIN/COMMIT would commit the guarded transaction
 * half way through).
 */
export function kyselyMysqlSession<DB>(db: Kysely<DB>, pool: object, onConnectionError: (err: Error) => void): MysqlSession<Transaction<DB>> {
  watchMysqlPool(pool, onConnectionError);
  return {
    async withConnection(body) {
      const { CompiledQuery } = await loadKysely();
      return db.connection().execute(async (conn) => {
        let lost: Error | undefined;
        const send = async (sql: string, values: readonly unknown[] = []) => {
          try {
            return await conn.executeQuery<Row>(CompiledQuery.raw(sql, [...values]));
          } catch (err) {
            if ((err as { fatal?: unknown }).fatal === true) lost ??= err as Error;
            throw err;
          }
        };
        return body(
          {
            run: async (sql, values) => (await send(sql, values)).rows as Row[],
            affected: async (sql, values) => Number((await send(sql, values)).numAffectedRows ?? 0n),
            lost: () => lost,
          },
          asTransaction(conn),
        );
      });
    },
    async query(sql, values = []) {
      const { CompiledQuery } = await loadKysely();
      return (await db.executeQuery<Row>(CompiledQuery.raw(sql, [...values]))).rows as Row[];
    },
    async update(sql, values = []) {
      const { CompiledQuery } = await loadKysely();
      return Number((await db.executeQuery(CompiledQuery.raw(sql, [...values]))).numAffectedRows ?? 0n);
    },
  };
}
