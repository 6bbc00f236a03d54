import { LeaseStoreUnavailableError } from '@fenced/shared';
import { replyOf } from '../in-flight.js';
import type { LeaseBackend } from '../lease-backend.js';
import type { LeaseStore } from '../lease-store.js';
import { formatLeaseValue, parseLeaseValue } from '../lease-value.js';
import { releaseHubOver } from '../release-hub.js';
import { memoryFireLog } from './memory-fire-log.js';
import { createMemoryLeaseServer, type MemoryLeaseServer } from './memory-server.js';

export interface MemoryLeasesOptions {
  /** The state shared by every process of the test (`createMemoryLeaseServer()`). @defaultValue a server of this backend's own */
  readonly server?: MemoryLeaseServer;
  /**
   * How long each reply takes, ms, by operation (`acquire`, `renew`, `release`, …): the store has
   * applied the request already, and its reply is on its way (a slow or congested network). For a
   * deterministic simulator that orders replies by seed. @defaultValue every reply on the next turn of the event loop
   */
  readonly replyDelayMs?: (operation: string) => number;
  /**
   * How long each request takes to reach the store, ms, by operation: the store applies it then, so
   * requests sent in one order can be applied in another, as over several pooled connections or
   * streams. @defaultValue applied as it is sent
   */
  readonly requestDelayMs?: (operation: string) => number;
}

/** The in-memory lease store of one process; `close()` is that process's connections going away. */
export interface MemoryLeases extends LeaseBackend {
  readonly server: MemoryLeaseServer;
  /** Every request after this fails as `LeaseStoreUnavailableError` (`unreachable`), and no release is heard. */
  close(): void;
}

/**
 * Leases in memory: a lease store for examples, a user's unit tests and a deterministic simulator,
 * that keeps every promise of the others (the lease-store conformance suite runs on it unchanged).
 * Processes that should see the same leases share one `server`; its clock judges expiry.
 *
 * @example
 * ```ts
 * const server = createMemoryLeaseServer();
 * const a = createCoordinator({ store: memoryLeases({ server }), lease: 'billing', ttlMs: 2_000, renewIntervalMs: 500 });
 * const b = createCoordinator({ store: memoryLeases({ server }), lease: 'billing', ttlMs: 2_000, renewIntervalMs: 500 });
 * ```
 */
export function memoryLeases(options: MemoryLeasesOptions = {}): MemoryLeases {
  const server = options.server ?? createMemoryLeaseServer();
  let closed = false;
  const unsubscribes = new Set<() => void>();

  /** One request: a step on the server, answered on a later turn of the event loop as a network reply is. */
  const request = async <T>(operation: string, step: () => T): Promise<T> => {
    if (closed) throw new LeaseStoreUnavailableError('memory', 'unreachable', `${operation}: the store was closed`, { cause: undefined });
    // Sent: it reaches the store even if this process closes meanwhile, as a request on the wire does.
    const travelMs = options.requestDelayMs?.(operation) ?? 0;
    if (travelMs > 0) await new Promise<void>((resolve) => setTimeout(resolve, travelMs));
    const result = step();
    const delayMs = options.replyDelayMs?.(operation) ?? 0;
    await new Promise<void>((resolve) => (delayMs > 0 ? setTimeout(resolve, delayMs) : setImmediate(resolve)));
    return result;
  };
  const listen = (lease: string, onRelease: () => void): (() => void) => {
    const unsubscribe = server.listen(lease, () => {
      if (!closed) onRelease();
    });
    unsubscribes.add(unsubscribe);
    return () => {
      unsubscribes.delete(unsubscribe);
      unsubscribe();
    };
  };

  const openLease = (lease: string, nodeId: string): LeaseStore => ({
    async acquire(ttlMs, _timeoutMs, inFlight) {
      const sent = request('acquire', () => {
        const granted = server.grant(lease, ttlMs, (token) => formatLeaseValue(token, nodeId));
        const time = server.time();
        if (granted !== null) return { won: true as const, token: granted.token, leaseValue: granted.value, time, confirmServer: async () => null };
        const holder = server.holder(lease)!;
        const held = parseLeaseValue(holder.value);
        return { won: false as const, holder: { value: holder.value, token: holder.token, ours: held?.nodeId === nodeId }, remainingMs: holder.remainingMs, time };
      });
      return replyOf(sent, inFlight);
    },
    renew: (leaseValue, ttlMs, _timeoutMs, inFlight) =>
      replyOf(
        request('renew', () => ({ renewed: server.extend(lease, leaseValue, ttlMs), time: server.time() })),
        inFlight,
      ),
    release: (leaseValue) => request('release', () => server.free(lease, leaseValue)),
    raiseCounter: (floor) => request('raise counter', () => server.raiseCounter(lease, floor)),
    recordElection(entry) {
      if (!closed) server.recordElection({ lease, nodeId, ...entry, at: server.now() });
    },
    async listenForReleases(_timeoutMs, onRelease, _onError, onListening) {
      const unsubscribe = await request('listen', () => listen(lease, onRelease));
      onListening?.('notify', 'in memory: a release is heard on the next turn of the event loop');
      return { close: unsubscribe };
    },
  });

  return {
    kind: 'memory',
    server,
    openLease,
    fireLog: (lease) => memoryFireLog(server, lease, request),
    openReleaseHub: async (timeoutMs, onError) =>
      releaseHubOver(async (lease, handlers) => request('listen', () => listen(lease, handlers.onRelease)), timeoutMs, onError),
    membership: (group) => ({
      beat: (member, ttlMs) => request('heartbeat', () => server.beat(group, member, ttlMs)),
      leave: (member) => request('leave', () => server.leave(group, member)),
    }),
    // Nothing to misconfigure: the store lives and dies with the process.
    configProblem: () => request('config', () => null),
    close() {
      closed = true;
      for (const unsubscribe of unsubscribes) unsubscribe();
      unsubscribes.clear();
    },
  };
}
