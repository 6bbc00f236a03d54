/**
 * The guard's public types name Kysely only through these structural types, never by importing
 * `kysely`: it is an optional peer, and a declaration file that imports a package the project does
 * not have fails a strict type check (`skipLibCheck: false`) of every project on `pg` alone.
 */

/** A Kysely instance, as far as the guard's overloads need to tell one from a `pg.Pool`. */
export interface KyselyLike {
  // `any`: the callback's parameter is `Transaction<DB>`, which only `KyselyTransactionOf` reads.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  transaction(): { execute(callback: (trx: any) => Promise<unknown>): Promise<unknown> };
  connection(): unknown;
  selectFrom(...args: never[]): unknown;
  executeQuery(...args: never[]): unknown;
}

/**
 * The transaction type of a Kysely instance (`Transaction<DB>` for a `Kysely<DB>`), read off the
 * callback of its `transaction().execute`.
 */
export type KyselyTransactionOf<D> = D extends { transaction(): { execute<O>(callback: (trx: infer Trx) => Promise<O>): Promise<O> } } ? Trx : never;
