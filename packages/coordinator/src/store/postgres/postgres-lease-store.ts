import type { Token } from '@fenced/shared';
import { storedToken } from '@fenced/shared/internal';
import { storeTimeOfMicros, type AcquireReply, type LeaseStore, type StoreTime } from '../lease-store.js';
import { replyOf } from '../in-flight.js';
import { parseLeaseValue } from '../lease-value.js';
import type { LeaseObjectNames } from './lease-names.js';
import { queryRows, type PgLeasePool } from './pg-pool.js';
import type { ReleaseNotifications } from './release-notifications.js';
import type { RenewBatcher } from '../renew-batcher.js';
import { withTimeout } from '@fenced/shared/internal';
import { TIMELINE_SQL, type PrimaryConfirmation } from './primary-confirmation.js';
import type { LeaseTakeover } from '../lease-takeover.js';

/** How many elections each lease keeps in its record, for `fenced status` and `fenced doctor`. */
const ELECTIONS_KEPT = 32;

interface AcquireRow {
  won: boolean;
  token: string;
  holder: string | null;
  remaining_ms: string;
  now_us: string;
  ended: number;
  timeline: string | null;
}

/** One lease's answer in a batch renew. */
export interface PostgresRenewAnswer {
  readonly renewed: boolean;
  /** The server's clock when it decided, microseconds since the epoch (a decimal string). */
  readonly nowMicros: string;
  /** The timeline of the server that answered; null on a server in recovery (see primary-confirmation.ts). */
  readonly timeline: bigint | null;
}

/**
 * One lease in PostgreSQL: a row per lease, granted, renewed and released by one function call each
 * (migrations/000001.sql), the token minted by the grant itself above the lease's previous token and
 * every fence of the guard beside it. Time is the server's clock, read in each call and carried in
 * each reply.
 */
export function postgresLeaseStore(
  pool: PgLeasePool,
  names: LeaseObjectNames,
  lease: string,
  nodeId: string,
  /** The coordinator's bound on one command (a third of the TTL): the primary confirmation stays within it. */
  commandTimeoutMs: number,
  shared: { readonly notifications: ReleaseNotifications; readonly renews: RenewBatcher<PostgresRenewAnswer>; readonly takeover: LeaseTakeover; readonly primary: PrimaryConfirmation | undefined },
): LeaseStore {
  const { notifications, renews, takeover, primary } = shared;
  const query = <Row>(text: string, values: unknown[], timeoutMs: number, operation: string) => queryRows<Row>(pool, names.installation, text, values, timeoutMs, operation);

  return {
    async acquire(ttlMs, timeoutMs, inFlight): Promise<AcquireReply> {
      // The server gives up waiting on the lease row well before this call gives up on the server:
      // its answer (what it ended, and that the row is free now) must arrive, not be timed out.
      const lockBudgetMs = Math.min(takeover.timeoutMs, Math.floor(timeoutMs * 0.5));
      const sent = query<AcquireRow>(
        `SELECT won, token, holder, remaining_ms::text, now_us::text, ended, (${TIMELINE_SQL})::text AS timeline FROM ${names.acquireFn}($1, $2, $3, $4, $5)`,
        [lease, nodeId, ttlMs, takeover.graceMs, lockBudgetMs],
        timeoutMs,
        'acquire',
      );
      const [row] = await replyOf(sent, inFlight);
      const repliedAt = performance.now();
      if (row === undefined) throw new Error('acquire answered no row');
      const time = storeTimeOfMicros(row.now_us);
      if (!row.won) {
        // No holder: the acquire gave up waiting for the writes of an expired term (it ended them).
        const held = row.holder === null ? null : parseLeaseValue(row.holder);
        return {
          won: false,
          holder: held === null ? null : { value: row.holder!, token: held.token, ours: held.nodeId === nodeId },
          remainingMs: Math.max(Number(row.remaining_ms), 0),
          time,
          endedWrites: Number(row.ended),
        };
      }
      const timeline = row.timeline === null ? null : BigInt(row.timeline);
      return {
        won: true,
        token: storedToken(row.token),
        leaseValue: row.holder!,
        time,
        endedWrites: Number(row.ended),
        confirmServer: async () => (primary === undefined ? null : primary.confirm(timeline, repliedAt, commandTimeoutMs)),
      };
    },

    async renew(leaseValue, ttlMs, timeoutMs, inFlight) {
      const owner = parseLeaseValue(leaseValue); // anything not made by this store owns nothing
      if (owner === null) return { renewed: false, time: await serverTime(timeoutMs()) };
      // Batched with the other leases this process renews now (renew-batcher.ts): one statement.
      const sent = withTimeout(renews.renew(ttlMs, { lease, token: owner.token.toString(), nodeId: owner.nodeId }), timeoutMs(), 'renew');
      const answer = await replyOf(sent, inFlight);
      const repliedAt = performance.now();
      if (primary !== undefined && answer.renewed) {
        // One reading of the time left for both bounds: the members' wait is set first and is never
        // longer, so it ends the round before the renew's own bound fires (Node counts timers in
        // whole milliseconds; two readings could straddle one, and fail a renew its primary confirmed).
        const leftMs = timeoutMs();
        const notCounted = await withTimeout(primary.confirm(answer.timeline, repliedAt, Math.min(commandTimeoutMs, leftMs)), leftMs, 'confirm primary');
        if (notCounted !== null) throw notCounted;
      }
      return { renewed: answer.renewed, time: storeTimeOfMicros(answer.nowMicros) };
    },

    async release(leaseValue, timeoutMs) {
      const owner = parseLeaseValue(leaseValue); // anything not made by this store owns nothing
      if (owner === null) return false;
      const [row] = await query<{ released: boolean }>(`SELECT ${names.releaseFn}($1, $2, $3) AS released`, [lease, owner.token.toString(), owner.nodeId], timeoutMs, 'release');
      return row?.released === true;
    },

    async raiseCounter(floor: Token, timeoutMs) {
      await query(`SELECT ${names.raiseFn}($1, $2)`, [lease, floor.toString()], timeoutMs, 'raise counter');
    },

    recordElection({ token, ttlMs, fences, regressed }) {
      query(`SELECT ${names.recordElectionFn}($1, $2, $3, $4, $5, $6, $7)`, [lease, token.toString(), nodeId, ttlMs, fences, regressed, ELECTIONS_KEPT], 10_000, 'record election').catch(
        () => undefined,
      );
    },

    async listenForReleases(timeoutMs, onRelease, onError, onListening) {
      const unsubscribe = await notifications.subscribe(lease, { onRelease, onError, ...(onListening === undefined ? {} : { onListening }) }, timeoutMs);
      return { close: unsubscribe };
    },
  };

  async function serverTime(timeoutMs: number): Promise<StoreTime> {
    const [row] = await query<{ now_us: string }>(`SELECT floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint::text AS now_us`, [], timeoutMs, 'time');
    return storeTimeOfMicros(row!.now_us);
  }
}
