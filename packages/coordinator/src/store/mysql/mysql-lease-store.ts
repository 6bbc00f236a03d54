import type { Token } from '@fenced/shared';
import { storedToken, withTimeout } from '@fenced/shared/internal';
import { replyOf } from '../in-flight.js';
import { storeTimeOfMicros, type AcquireReply, type LeaseStore, type StoreTime } from '../lease-store.js';
import { parseLeaseValue } from '../lease-value.js';
import type { ReleasePolling } from '../release-polling.js';
import type { RenewBatcher } from '../renew-batcher.js';
import type { MysqlLeaseObjectNames } from './mysql-lease-names.js';
import { queryRows, type MysqlLeasePool } from './mysql-pool.js';

/** How many elections each lease keeps in its record, for `fenced status` and `fenced doctor`. */
const ELECTIONS_KEPT = 32;

/** The server's clock now, microseconds since the epoch, whatever the session's time zone. */
export const NOW_US_SQL = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`;

/** One lease's answer in a batch renew. */
export interface MysqlRenewAnswer {
  readonly renewed: boolean;
  /** The server's clock when it decided, microseconds since the epoch (a decimal string). */
  readonly nowMicros: string;
}

/**
 * One lease in MySQL/MariaDB: a row per lease, granted by one procedure call (migrations/000001.sql)
 * that mints the token above the lease's previous token and every fence of the guard beside it,
 * renewed in batches with the process's other leases, released by one statement that checks the
 * holder and the token. Time is the server's clock, read in each call and carried in each reply.
 */
export function mysqlLeaseStore(
  pool: MysqlLeasePool,
  names: MysqlLeaseObjectNames,
  lease: string,
  nodeId: string,
  shared: { readonly releases: ReleasePolling; readonly renews: RenewBatcher<MysqlRenewAnswer> },
): LeaseStore {
  const { releases, renews } = shared;
  const query = (sql: string, values: readonly unknown[], timeoutMs: number, operation: string) => queryRows(pool, names.installation, sql, values, timeoutMs, operation);

  return {
    async acquire(ttlMs, timeoutMs, inFlight): Promise<AcquireReply> {
      const [row] = await replyOf(query(`CALL ${names.acquireProc}(?, ?, ?)`, [lease, nodeId, ttlMs], timeoutMs, 'acquire'), inFlight);
      if (row === undefined) throw new Error('acquire answered no row');
      const time = storeTimeOfMicros(String(row['now_us']));
      const holder = String(row['holder']);
      if (Number(row['won']) !== 1) {
        const held = parseLeaseValue(holder);
        return {
          won: false,
          holder: held === null ? null : { value: holder, token: held.token, ours: held.nodeId === nodeId },
          remainingMs: Math.max(Number(row['remaining_ms']), 0),
          time,
        };
      }
      return { won: true, token: storedToken(String(row['token'])), leaseValue: holder, time, confirmServer: async () => null };
    },

    async renew(leaseValue, ttlMs, timeoutMs, inFlight) {
      const owner = parseLeaseValue(leaseValue); // anything not made by this store owns nothing
      if (owner === null) return { renewed: false, time: await serverTime(timeoutMs()) };
      // Batched with the other leases this process renews now (renew-batcher.ts): one call.
      const sent = withTimeout(renews.renew(ttlMs, { lease, token: owner.token.toString(), nodeId: owner.nodeId }), timeoutMs(), 'renew');
      const answer = await replyOf(sent, inFlight);
      return { renewed: answer.renewed, time: storeTimeOfMicros(answer.nowMicros) };
    },

    async release(leaseValue, timeoutMs) {
      const owner = parseLeaseValue(leaseValue); // anything not made by this store owns nothing
      if (owner === null) return false;
      const [header] = await withTimeout(
        pool.query(`UPDATE ${names.leases} SET holder = NULL, expires_us = NULL WHERE name = ? AND token = ? AND holder = ?`, [lease, owner.token.toString(), owner.nodeId]),
        timeoutMs,
        'release',
      );
      return Number((header as { affectedRows?: unknown }).affectedRows ?? 0) > 0;
    },

    async raiseCounter(floor: Token, timeoutMs) {
      await query(`INSERT INTO ${names.leases} (name, token) VALUES (?, ?) ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))`, [lease, floor.toString()], timeoutMs, 'raise counter');
    },

    recordElection({ token, ttlMs, fences, regressed }) {
      query(`CALL ${names.recordElectionProc}(?, ?, ?, ?, ?, ?, ?)`, [lease, token.toString(), nodeId, ttlMs, fences, regressed, ELECTIONS_KEPT], 10_000, 'record election').catch(() => undefined);
    },

    async listenForReleases(_timeoutMs, onRelease, onError, onListening) {
      const unsubscribe = await releases.subscribe(lease, { onRelease, onError, ...(onListening === undefined ? {} : { onListening }) });
      return { close: unsubscribe };
    },
  };

  async function serverTime(timeoutMs: number): Promise<StoreTime> {
    const [row] = await query(`SELECT CAST(${NOW_US_SQL} AS CHAR) AS now_us`, [], timeoutMs, 'time');
    return storeTimeOfMicros(String(row!['now_us']));
  }
}
