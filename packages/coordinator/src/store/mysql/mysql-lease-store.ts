import type { Token } from '@fenced/shared';
import { MYSQL_NOW_US_SQL, storedToken, withTimeout } from '@fenced/shared/internal';
import { replyOf } from '../in-flight.js';
import { storeTimeOfMicros, type AcquireReply, type LeaseStore, type StoreTime } from '../lease-store.js';
import { parseLeaseValue } from '../lease-value.js';
import type { ReleasePolling } from '../release-polling.js';
import type { RenewBatcher } from '../renew-batcher.js';
import type { MysqlLeaseObjectNames } from './mysql-lease-names.js';
import { grantWithTakeover } from './mysql-grant.js';
import type { LeaseTakeover } from '../lease-takeover.js';
import { queryRows, type MysqlLeasePool } from './mysql-pool.js';

/** How many elections each lease keeps in its record, for `fenced status` and `fenced doctor`. */
const ELECTIONS_KEPT = 32;

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
  shared: { readonly releases: ReleasePolling; readonly renews: RenewBatcher<MysqlRenewAnswer>; readonly takeover: LeaseTakeover },
): LeaseStore {
  const { releases, renews, takeover } = shared;
  const query = (sql: string, values: readonly unknown[], timeoutMs: number, operation: string) => queryRows(pool, names.installation, sql, values, timeoutMs, operation);

  return {
    async acquire(ttlMs, timeoutMs, inFlight): Promise<AcquireReply> {
      // The grant gives up waiting on the term row well before this call gives up on the server: its
      // answer (what it ended, and that the row is free now) must arrive, not be timed out.
      const budget = { graceMs: takeover.graceMs, timeoutMs: Math.min(takeover.timeoutMs, Math.floor(timeoutMs * 0.5)) };
      const sent = withTimeout(grantWithTakeover(pool, names, [lease, nodeId, ttlMs], budget), timeoutMs, 'acquire');
      const { row, ended } = await replyOf(sent, inFlight);
      if (row === null) {
        // It waited as long as it may for the expired term's open writes (it ended them): try again at once.
        return { won: false, holder: null, remainingMs: 0, time: await serverTime(timeoutMs), endedWrites: ended };
      }
      const time = storeTimeOfMicros(String(row['now_us']));
      const holder = String(row['holder']);
      if (Number(row['won']) !== 1) {
        const held = parseLeaseValue(holder);
        return {
          won: false,
          holder: held === null ? null : { value: holder, token: held.token, ours: held.nodeId === nodeId },
          remainingMs: Math.max(Number(row['remaining_ms']), 0),
          time,
          endedWrites: ended,
        };
      }
      return { won: true, token: storedToken(String(row['token'])), leaseValue: holder, time, endedWrites: ended, confirmServer: async () => null };
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
      const [row] = await query(`CALL ${names.releaseProc}(?, ?, ?)`, [lease, owner.token.toString(), owner.nodeId], timeoutMs, 'release');
      return Number(row?.['released'] ?? 0) > 0;
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
    const [row] = await query(`SELECT CAST(${MYSQL_NOW_US_SQL} AS CHAR) AS now_us`, [], timeoutMs, 'time');
    return storeTimeOfMicros(String(row!['now_us']));
  }
}
