import { queryRows, type PgLeasePool } from './pg-pool.js';

/**
 * The fence database's clock as a time source for a lease store without one (etcd): every replica
 * then judges due times by the clock the guarded writes commit by, not by its own.
 *
 * @example
 * ```ts
 * const leases = etcdLeases({ client, clock: postgresClock(pool) });
 * ```
 */
export function postgresClock(pool: PgLeasePool): { readonly read: (timeoutMs: number) => Promise<number> } {
  return {
    async read(timeoutMs) {
      const [row] = await queryRows<{ now_us: string }>(pool, 'clock', `SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint::text AS now_us`, [], timeoutMs, 'read clock');
      return Number(BigInt(row!.now_us) / 1000n) + Number(BigInt(row!.now_us) % 1000n) / 1000;
    },
  };
}
