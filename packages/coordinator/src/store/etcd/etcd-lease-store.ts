import type { Etcd3, ICompare, IRequestOp, ITxnResponse } from 'etcd3';
import { EtcdLeaseInvalidError } from 'etcd3';
import type { Token } from '@fenced/shared';
import type { AcquireReply, LeaseStore } from '../lease-store.js';
import { replyOf } from '../in-flight.js';
import { formatLeaseValue, parseLeaseValue } from '../lease-value.js';
import type { EtcdClock } from './etcd-clock.js';
import { etcdUnavailable } from './etcd-errors.js';
import type { EtcdHolderReads } from './etcd-holder-reads.js';
import { holderValue, isTermOf, parseBase, parseHolder, readHolder, tokenOf, type Holder } from './etcd-holder.js';
import type { EtcdKeys } from './etcd-keys.js';
import { withinBudget } from './etcd-budget.js';
import type { EtcdSession, EtcdSessions } from './etcd-sessions.js';
import type { EtcdReleaseWatch } from './etcd-release-watch.js';

/** How many elections each lease keeps in its record, for `fenced status` and `fenced doctor`. */
const ELECTIONS_KEPT = 32;
/** How often an acquire tries again when the lease's base moved under it (a counter repair). */
const ACQUIRE_ATTEMPTS = 3;

/** What every lease store of one backend shares. */
export interface EtcdContext {
  readonly client: Etcd3;
  readonly keys: EtcdKeys;
  readonly sessions: EtcdSessions;
  /** The owner checks of renewals, read together per turn. */
  readonly holders: EtcdHolderReads;
  readonly clock: EtcdClock;
  readonly releases: EtcdReleaseWatch;
}

/** A compare that holds while the key is exactly this holder's (the same term, not a later one). */
export function stillHeld(key: Buffer, holder: Pick<Holder, 'createRevision' | 'raw'>): ICompare[] {
  return [
    { key, target: 'Create', result: 'Equal', create_revision: holder.createRevision },
    { key, target: 'Value', result: 'Equal', value: holder.raw },
  ];
}

/**
 * One lease in etcd. The lease is a key attached to the process's etcd lease for its TTL (etcd
 * deletes it when that expires), created only if absent in one transaction; the token is etcd's
 * revision of that creation plus the lease's base (etcd-holder.ts). Renew is a keep-alive of the etcd
 * lease sent after the renew was asked for, with the key read in parallel (with the other renewals of
 * the same turn, etcd-holder-reads.ts): renewed only while the key is still this term's. Deadlines stay the coordinator's: counted on its monotonic clock from the send.
 */
export function etcdLeaseStore(context: EtcdContext, lease: string, nodeId: string): LeaseStore {
  const { client, keys, sessions, holders, clock, releases } = context;
  const key = keys.lease(lease);
  const baseKey = keys.base(lease);
  /**
   * The terms this store granted, by lease value: the session the key is attached to, and the key as
   * written (its creation revision and value), so that a release compares it without reading it first.
   */
  const held = new Map<string, { readonly session: EtcdSession; readonly written: Pick<Holder, 'createRevision' | 'raw'> }>();
  /** The lease's base as last read: a grant compares it, and reads it again when it moved. */
  let knownBase = parseBase(undefined);

  const txn = (operation: string, request: { compare?: ICompare[]; success?: IRequestOp[]; failure?: IRequestOp[] }, timeoutMs: number): Promise<ITxnResponse> =>
    withinBudget('txn', timeoutMs, (o) => client.kv.txn(request, o)).catch((error: unknown) => {
      throw error instanceof EtcdLeaseInvalidError ? error : etcdUnavailable(operation, error);
    });
  const holderNow = (timeoutMs: number) =>
    readHolder(client, key, timeoutMs).catch((error: unknown) => {
      throw etcdUnavailable('read lease', error);
    });

  async function remainingMs(holder: Holder, timeoutMs: number): Promise<number> {
    const reply = await withinBudget('leaseTimeToLive', timeoutMs, (o) => client.leaseClient.leaseTimeToLive({ ID: holder.etcdLease, keys: false }, o)).catch(() => null);
    return reply === null ? 0 : Math.max(Number(reply.TTL), 0) * 1000;
  }

  return {
    async acquire(ttlMs, timeoutMs, inFlight): Promise<AcquireReply> {
      const startedAt = performance.now();
      const left = () => Math.max(1, timeoutMs - (performance.now() - startedAt));
      const time = clock.now(timeoutMs);
      time.catch(() => undefined);
      for (let attempt = 1; ; attempt++) {
        const session = await sessions.session(ttlMs, left());
        // The keep-alive leaves after the acquire was asked for, so the etcd lease the key is attached
        // to lives at least a TTL from the coordinator's send, however old the session is.
        const alive = sessions.keepAlive(session, left());
        alive.catch(() => undefined);
        // One transaction: the key created if absent and the base is the one last seen; otherwise the
        // holder and the base read, to answer or to try again with the base as it is now.
        const value = holderValue(nodeId, knownBase.base, session.id);
        const sent = txn(
          'acquire',
          {
            compare: [
              { key, target: 'Create', result: 'Equal', create_revision: 0 },
              { key: baseKey, target: 'Mod', result: 'Equal', mod_revision: knownBase.modRevision },
            ],
            success: [{ request_put: { key, value, lease: session.id } }],
            failure: [{ request_range: { key } }, { request_range: { key: baseKey } }],
          },
          left(),
        );
        let reply: ITxnResponse;
        try {
          reply = await replyOf(sent, attempt === 1 ? inFlight : undefined);
        } catch (error) {
          // The session expired between its last keep-alive and this write: start a new one.
          if (error instanceof EtcdLeaseInvalidError && attempt < ACQUIRE_ATTEMPTS) {
            sessions.drop(session);
            continue;
          }
          throw etcdUnavailable('acquire', error);
        }
        if (!reply.succeeded) {
          const holder = parseHolder(reply.responses[0]?.response_range.kvs[0]);
          if (holder !== null) {
            return {
              won: false,
              holder: { value: formatLeaseValue(holder.token, holder.nodeId), token: holder.token, ours: holder.nodeId === nodeId },
              remainingMs: await remainingMs(holder, left()),
              time: await time,
            };
          }
          // Free, but the base moved (a counter repair, or the first look at it): try with it as it is.
          knownBase = parseBase(reply.responses[1]?.response_range.kvs[0]);
          if (attempt < ACQUIRE_ATTEMPTS) continue;
          return { won: false, holder: null, remainingMs: 0, time: await time };
        }
        if (!(await alive)) return { won: false, holder: null, remainingMs: 0, time: await time };
        // The key was created by this very transaction: its create_revision is the reply's revision.
        const token = tokenOf(knownBase.base, reply.header.revision);
        const leaseValue = formatLeaseValue(token, nodeId);
        held.set(leaseValue, { session, written: { createRevision: reply.header.revision, raw: value } });
        // Linearizable: a member cut off from the quorum could not have committed the write.
        return { won: true, token, leaseValue, time: await time, confirmServer: async () => null };
      }
    },

    async renew(leaseValue, ttlMs, timeoutMs, inFlight) {
      const time = clock.now(timeoutMs());
      time.catch(() => undefined);
      const owner = parseLeaseValue(leaseValue); // anything not made by this store owns nothing
      const session = held.get(leaseValue)?.session;
      if (owner === null || session === undefined || session.dead) return { renewed: false, time: await time };
      const alive = sessions.keepAlive(session, timeoutMs());
      // Read with the other renewals of this turn: one request for a lease group's names.
      const holder = holders.read(key, timeoutMs()).catch((error: unknown) => {
        throw etcdUnavailable('read lease', error);
      });
      const [kept, current] = await replyOf(Promise.all([alive, holder]), inFlight);
      // The owner check: the key must still be this term's, on this session. A keep-alive alone would
      // also keep alive a key an operator deleted, or one the session no longer carries.
      const renewed = kept && isTermOf(current, owner) && current.etcdLease === session.id;
      if (!renewed) held.delete(leaseValue);
      return { renewed, time: await time };
    },

    async release(leaseValue, timeoutMs) {
      const owner = parseLeaseValue(leaseValue);
      if (owner === null) return false;
      const granted = held.get(leaseValue);
      held.delete(leaseValue);
      // A term this store granted is released in one round trip: the key is deleted only while it is
      // still exactly as written (a handover's leaderless time is this request and the successor's
      // grant). A term it did not grant (an acquire whose reply came too late, seen as our holder)
      // is read first.
      let written = granted?.written;
      if (written === undefined) {
        const holder = await holderNow(timeoutMs);
        if (!isTermOf(holder, owner)) return false;
        written = holder;
      }
      const reply = await txn('release', { compare: stillHeld(key, written), success: [{ request_delete_range: { key } }] }, timeoutMs);
      return reply.succeeded;
    },

    async raiseCounter(floor: Token, timeoutMs) {
      for (let attempt = 1; attempt <= ACQUIRE_ATTEMPTS; attempt++) {
        const read = await txn('read base', { success: [{ request_range: { key: baseKey } }] }, timeoutMs);
        const { base, modRevision } = parseBase(read.responses[0]?.response_range.kvs[0]);
        // The next key is created at a revision above this write's, itself above the one read now:
        // at least revision + 2. A base of floor − revision − 1 makes its token at least floor + 1.
        const target = floor - BigInt(read.header.revision) - 1n;
        if (target <= base) return;
        const reply = await txn(
          'raise counter',
          { compare: [{ key: baseKey, target: 'Mod', result: 'Equal', mod_revision: modRevision }], success: [{ request_put: { key: baseKey, value: Buffer.from(target.toString()) } }] },
          timeoutMs,
        );
        if (reply.succeeded) return;
      }
      throw etcdUnavailable('raise counter', new Error('the base kept moving under the repair'));
    },

    recordElection({ token, ttlMs, fences, regressed }) {
      const elections = keys.elections(lease);
      const entry = JSON.stringify({ token: token.toString(), nodeId, ttlMs, fences, regressed, at: Date.now() });
      void (async () => {
        await withinBudget('put', 10_000, (o) => client.kv.put({ key: elections.entry(token), value: Buffer.from(entry) }, o));
        const list = await withinBudget('range', 10_000, (o) => client.kv.range({ key: elections.start, range_end: elections.end, keys_only: true, sort_order: 'Descend', sort_target: 'Key', limit: ELECTIONS_KEPT + 1 }, o));
        const oldestKept = list.kvs[ELECTIONS_KEPT - 1];
        if (list.kvs.length > ELECTIONS_KEPT && oldestKept !== undefined) await withinBudget('deleteRange', 10_000, (o) => client.kv.deleteRange({ key: elections.start, range_end: oldestKept.key }, o));
      })().catch(() => undefined);
    },

    async listenForReleases(timeoutMs, onRelease, onError, onListening) {
      const unsubscribe = await releases.subscribe(lease, { onRelease, onError }, timeoutMs);
      onListening?.('notify', 'etcd watch');
      return { close: unsubscribe };
    },
  };
}
