import { withTimeout } from '@fenced/shared/internal';
import type { PgLeasePool } from './pg-pool.js';

/**
 * The timeline of the server that runs a statement, as a column of that very statement: null on a
 * server in recovery (a standby), else the timeline its new WAL is written on. A promotion starts a
 * new timeline, so a deposed primary that wakes up (it was frozen, or cut off, while its replica was
 * promoted) is on an earlier timeline than the primary that replaced it, though it does not know.
 */
export const TIMELINE_SQL = `CASE WHEN pg_is_in_recovery() THEN NULL ELSE ('x' || substr(pg_walfile_name(pg_current_wal_insert_lsn()), 1, 8))::bit(32)::bigint END`;

/**
 * Whether a reply came from the primary that counts, for deployments with streaming replicas and a
 * failover (Patroni, a managed service, an operator's promote). PostgreSQL has no Sentinel to ask,
 * and asynchronous replication means the promoted replica may lack the last grants; worse, the
 * deposed primary may resume (a frozen VM) with pooled connections still open to it, still believing
 * it is the primary: a lease granted there mints a token the new primary never saw, and that
 * leader's writes go to a history the cluster has left.
 *
 * So, like the Sentinel confirmation for Redis: after every grant and every renew, the store asks each
 * member of the cluster (a pool per member, given by the user) whether it is a primary and on which
 * timeline. The reply counts only when it came from a primary (a timeline, not a standby), some
 * member confirms a primary on that timeline, no member that answers is a primary on a later
 * timeline, and no member ever did (the latest timeline seen is remembered: a member that is slow
 * to answer once cannot make a deposed primary count again). A member that does not answer in time
 * is left out: a frozen or crashed old primary must not stop the new one from leading. The time
 * allowed is the option's, at most the lease command's own timeout: a frozen member costs each round
 * that much, and the grant must still be decided before its deadline.
 *
 * What it cannot see: a deposed primary that still answers its own clients but cannot reach the new
 * primary (a network partition, not a freeze). That needs the failover tool to stop the old primary
 * (Patroni's watchdog), or synchronous replication; `fenced doctor` says which this deployment has.
 * Concurrent callers share one round of questions asked after their replies arrived.
 */
export interface PrimaryConfirmation {
  /**
   * Null when a reply from a server on `timeline` (null: in recovery) counts, asking the members
   * after `since` (`performance.now()`) and waiting `timeoutMs` at most for each; else why not.
   */
  confirm(timeline: bigint | null, since: number, timeoutMs: number): Promise<Error | null>;
}

/** What one member answered: its timeline when a primary, null when a standby, undefined: no answer. */
type MemberAnswer = bigint | null | undefined;

export function primaryConfirmation(members: readonly PgLeasePool[], timeoutMs: number): PrimaryConfirmation {
  const ask = (waitMs: number): Promise<MemberAnswer[]> =>
    Promise.all(
      members.map((member) =>
        withTimeout(member.query(`SELECT (${TIMELINE_SQL})::text AS timeline`), waitMs, 'confirm primary').then(
          (result) => {
            const text = (result.rows[0] as { timeline: string | null } | undefined)?.timeline;
            return text === null || text === undefined ? null : BigInt(text);
          },
          () => undefined,
        ),
      ),
    );

  let round: { startedAt: number; answers: Promise<MemberAnswer[]> } | undefined;
  /** The latest timeline any member answered with: the cluster never goes back to an earlier one. */
  let latest = 0n;
  return {
    async confirm(timeline, since, callerTimeoutMs) {
      if (timeline === null) return new NotOnPrimaryError('the reply came from a server in recovery (a standby)');
      if (round === undefined || round.startedAt < since) round = { startedAt: performance.now(), answers: ask(Math.max(1, Math.min(timeoutMs, callerTimeoutMs))) };
      const primaries = (await round.answers).filter((a): a is bigint => typeof a === 'bigint');
      for (const t of primaries) if (t > latest) latest = t;
      if (latest > timeline) return new NotOnPrimaryError(`the reply came from a deposed primary (timeline ${timeline}); the cluster's primary is on timeline ${latest}`);
      if (!primaries.includes(timeline)) return new NotOnPrimaryError(`no member answered as the primary on timeline ${timeline}`);
      return null;
    },
  };
}

/** A grant or renew whose server is not the primary that counts (see `PrimaryConfirmation`). */
export class NotOnPrimaryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotOnPrimaryError';
  }
}
