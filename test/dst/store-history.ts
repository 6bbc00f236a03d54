import { parseLeaseValue } from '@fenced/coordinator';
import type { MemoryLeaseServer, MemoryLeaseSnapshot } from '@fenced/coordinator/memory';

/**
 * What the in-memory lease store did to terms, numbered in the order it did it: each grant and
 * renewal of a term, each replica copy taken and each failover to one. The judge reads it to tell an
 * overlap of beliefs the store caused (a failover lost the earlier term's latest write: its grant or
 * a renewal, so the store let its lease go early) from one the SDK caused (the store still held the
 * earlier term's lease as the holder knew it). Steps are numbered, not timed: two in one virtual
 * millisecond are still ordered.
 */
export interface StoreHistory {
  /**
   * Each term the store granted, by `node@token`, oldest first: a store that lost its counter can
   * grant one node the same token twice, and each grant is a term of its own.
   */
  readonly grants: ReadonlyMap<string, readonly StoreTerm[]>;
  /** Each failover: its step, its time (virtual ms), and the step its copy was taken at (0: the store restarted empty). */
  readonly failovers: ReadonlyArray<{ readonly step: number; readonly at: number; readonly copiedAt: number }>;
  /** Each release the store granted (the lease freed by its holder), by `node@token`, with its time (virtual ms). */
  readonly releases: ReadonlyArray<{ readonly key: string; readonly at: number }>;
}

/** One grant of a lease and its renewals. */
export interface StoreTerm {
  /** When it was granted (virtual ms): a node's `lease.acquired` at or after it is this term's. */
  readonly grantedAt: number;
  /** The steps of its writes, the grant first. */
  readonly writes: readonly number[];
}

export const termKey = (nodeId: string, token: bigint): string => `${nodeId}@${token}`;

/** The term a node's `lease.acquired` at `at` announced: the last grant of its token to it by then. */
export function termAt(history: StoreHistory, key: string, at: number): StoreTerm | undefined {
  const terms = history.grants.get(key) ?? [];
  for (let i = terms.length - 1; i >= 0; i--) if (terms[i]!.grantedAt <= at) return terms[i];
  return undefined;
}

/**
 * Records what `server` does from now on, by wrapping its grant, extend, free, snapshot and failOver in
 * place (the store's behaviour is unchanged: each wrapper calls the original and notes the step).
 * `pristine` is a copy taken before any term: a failover to it is a restart without persistence.
 */
export function recordStoreHistory(server: MemoryLeaseServer, pristine: MemoryLeaseSnapshot): StoreHistory {
  let step = 0;
  const grants = new Map<string, Array<{ grantedAt: number; writes: number[] }>>();
  const failovers: Array<{ step: number; at: number; copiedAt: number }> = [];
  const releases: Array<{ key: string; at: number }> = [];
  const copiedAt = new WeakMap<MemoryLeaseSnapshot, number>([[pristine, 0]]);
  const keyOf = (value: string) => {
    const term = parseLeaseValue(value);
    return term === null ? undefined : termKey(term.nodeId, term.token);
  };

  const { grant, extend, free, snapshot, failOver } = server;
  server.grant = (lease, ttlMs, valueOf) => {
    const granted = grant.call(server, lease, ttlMs, valueOf);
    const key = granted === null ? undefined : keyOf(granted.value);
    if (key !== undefined) grants.set(key, [...(grants.get(key) ?? []), { grantedAt: server.now(), writes: [++step] }]);
    return granted;
  };
  server.extend = (lease, value, ttlMs) => {
    const extended = extend.call(server, lease, value, ttlMs);
    const key = extended ? keyOf(value) : undefined;
    if (key !== undefined) grants.get(key)?.at(-1)?.writes.push(++step);
    return extended;
  };
  server.free = (lease, value) => {
    const freed = free.call(server, lease, value);
    const key = freed ? keyOf(value) : undefined;
    if (key !== undefined) releases.push({ key, at: server.now() });
    return freed;
  };
  server.snapshot = () => {
    const copy = snapshot.call(server);
    copiedAt.set(copy, ++step);
    return copy;
  };
  server.failOver = (copy) => {
    failOver.call(server, copy);
    failovers.push({ step: ++step, at: server.now(), copiedAt: copiedAt.get(copy) ?? 0 });
  };
  return { grants, failovers, releases };
}

/**
 * Whether the store, not the SDK, let `later` be granted while `earlier` was still believed: a
 * failover between the two grants went back to a copy older than one of `earlier`'s writes before
 * it (the grant, or a renewal that had moved its expiry on).
 */
export function storeLostEarlierTerm(history: StoreHistory, earlier: StoreTerm, later: StoreTerm): boolean {
  const granted = earlier.writes[0]!;
  const laterGranted = later.writes[0]!;
  return history.failovers.some((f) => f.step > granted && f.step < laterGranted && earlier.writes.some((w) => w > f.copiedAt && w < f.step));
}
