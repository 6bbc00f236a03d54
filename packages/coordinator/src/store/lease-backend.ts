import type { FireLog } from './fire-log.js';
import type { LeaseStore } from './lease-store.js';

// The seam between the state machines (the coordinator, the lease group, the scheduler) and the
// store their leases live in, as kysely separates a dialect from its query builder: everything that
// names a driver lives behind it, every role of a store in its one folder under store/ (store/redis/,
// say: the lease, the fire log, the membership, the release hub, its scripts). One backend
// serves every lease of a process; the state machines above never know which store they run on.

/**
 * Which store a backend keeps its leases in, as data: `'redis'`, `'postgres'`, `'etcd'`, or any store's
 * own name. It travels from the store (`LeaseBackend.kind`) into events (`lease-store.error`'s
 * `store`), metrics and the operators' tools, which look a store up by it; nothing above the seam
 * lists the kinds.
 */
export type LeaseStoreKind = string;

/** Where leases live: what `createCoordinator({ store })` and `createLeaseGroup({ store })` take. */
export interface LeaseBackend {
  readonly kind: LeaseStoreKind;
  /**
   * The store sends the renews made together as one request: coordinators then renew on a shared
   * grid (every multiple of the renew interval on the process's monotonic clock), so that a process's
   * leases renew together, with one statement per tick.
   */
  readonly batchesRenewals?: boolean;
  /** The store of one lease, as `nodeId` competes for it; `timeoutMs` bounds each of its requests. */
  openLease(lease: string, nodeId: string, timeoutMs: number): LeaseStore;
  /** The scheduler's record of fires, kept beside `lease` and checked against it. */
  fireLog(lease: string): FireLog;
  /** One listener for the releases of many leases (a lease group's). */
  openReleaseHub(timeoutMs: number, onError: (error: unknown) => void): Promise<ReleaseHub>;
  /** The member list of a lease group, judged by the store's clock. */
  membership(group: string): GroupMembership;
  /** A setting of the store that makes leases unsafe, or null. */
  configProblem(timeoutMs: number): Promise<string | null>;
}

/** Releases of many leases heard on one connection; `listen` resolves once the lease is heard. */
export interface ReleaseHub {
  /** @returns an unsubscribe. */
  listen(lease: string, onRelease: () => void): Promise<() => void>;
  close(): void;
}

/** One heartbeat's answer: the live members, sorted, and when the first other one expires. */
export interface MemberList {
  readonly members: readonly string[];
  /**
   * After how long (store ms) the first other member expires unless it beats again (-1: no other
   * member): the caller beats again right then, so a dead member's leases move at its expiry.
   */
  readonly nextExpiryMs: number;
}

export interface GroupMembership {
  /** Keeps `member` live for `ttlMs` from now by the store's clock, and returns the live list. */
  beat(member: string, ttlMs: number, timeoutMs: number): Promise<MemberList>;
  /** Takes `member` off the list at once (a graceful stop). */
  leave(member: string, timeoutMs: number): Promise<void>;
}
