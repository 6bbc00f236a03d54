import type { TransactionExecutor } from '../write-context.js';
import { isKyselyLike, loadKysely } from './kysely.js';

/**
 * How a store runs statements on a transaction its driver hands out (a pg client, a mysql2
 * connection), or undefined when `tx` is not one of its driver's.
 */
export type DriverExecutor = (tx: object) => TransactionExecutor | undefined;

/**
 * The executor of a transaction the caller holds (`guardedWriteIn`), from what the caller handed the
 * guard: an executor already (`executeSql`, as pg-boss's `tx`), a Kysely transaction, or a
 * transaction of the store's own driver. Anything else is refused before a statement is sent: a pool,
 * whose statements would each run on a connection of their own, is not a transaction.
 */
export function callerExecutor(tx: unknown, store: string, driverExecutor: DriverExecutor, isPool: (tx: object) => boolean): TransactionExecutor {
  if (typeof tx !== 'object' || tx === null) throw refused(store, 'must be the transaction the write joins');
  if (typeof (tx as Partial<TransactionExecutor>).executeSql === 'function') return tx as TransactionExecutor;
  if (isKyselyLike(tx)) {
    if ((tx as { isTransaction?: unknown }).isTransaction !== true) throw refused(store, 'is a Kysely instance, not a transaction: pass the trx of db.transaction().execute(trx => ...)');
    return kyselyExecutor(tx);
  }
  if (isPool(tx)) throw refused(store, 'is a pool, not a transaction: pass the connection the transaction is open on');
  const executor = driverExecutor(tx);
  if (executor === undefined) throw refused(store, `must be a transaction of the ${store} driver, a Kysely transaction, or have executeSql(text, values)`);
  return executor;
}

function kyselyExecutor(trx: { executeQuery(...args: never[]): unknown }): TransactionExecutor {
  const run = trx.executeQuery as unknown as (query: unknown) => Promise<{ rows: unknown[] }>;
  return {
    async executeSql(text, values = []) {
      const { CompiledQuery } = await loadKysely();
      const { rows } = await run.call(trx, CompiledQuery.raw(text, values));
      return { rows };
    },
  };
}

// A TypeError, as for any argument of the wrong kind (a function that is not one): nothing was sent.
const refused = (store: string, message: string) => new TypeError(`guardedWriteIn: tx ${message} (${store} fence store)`);
