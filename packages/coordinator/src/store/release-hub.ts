import type { ReleaseHub } from './lease-backend.js';

/** Subscribes to one lease's releases on a process-wide listener; resolves with the unsubscribe. */
export type SubscribeReleases = (lease: string, handlers: { readonly onRelease: () => void; readonly onError: (error: unknown) => void }, timeoutMs: number) => Promise<() => void>;

/**
 * A lease group's hub over a store's process-wide release listener (PostgreSQL's notifications,
 * etcd's watch): it keeps the group's subscriptions so that `close()` ends them all.
 */
export function releaseHubOver(subscribe: SubscribeReleases, timeoutMs: number, onError: (error: unknown) => void): ReleaseHub {
  const unsubscribes = new Set<() => void>();
  let closed = false;
  return {
    async listen(lease, onRelease) {
      const unsubscribe = await subscribe(lease, { onRelease, onError }, timeoutMs);
      // Closed while the subscription was being made: it ends too, or it would outlive the hub that
      // promised to end them all (and hear releases for a group that stopped).
      if (closed) {
        unsubscribe();
        throw closedWhileSubscribing(lease);
      }
      unsubscribes.add(unsubscribe);
      return () => {
        unsubscribes.delete(unsubscribe);
        unsubscribe();
      };
    },
    close() {
      closed = true;
      for (const unsubscribe of unsubscribes) unsubscribe();
      unsubscribes.clear();
    },
  };
}

/** What a hub's `listen` throws when the hub was closed while the subscription was being made. */
export function closedWhileSubscribing(lease: string): Error {
  return new Error(`the release hub was closed while ${lease}'s subscription was being made`);
}
