// What the SQL fence stores share about a caller's Kysely instance: telling one apart from a driver's
// pool, and handing fn the guard's own transaction dressed as Kysely's.
import type { Kysely, Transaction } from 'kysely';

// kysely is an optional peer dependency: loaded only when the caller handed the guard a Kysely instance.
let kyselyModule: Promise<typeof import('kysely')> | undefined;
export const loadKysely = () => (kyselyModule ??= import('kysely'));

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
