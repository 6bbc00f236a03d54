import type { Etcd3, Watcher } from 'etcd3';
import { withTimeout } from '@fenced/shared/internal';
import { etcdUnavailable } from './etcd-errors.js';
import type { EtcdKeys } from './etcd-keys.js';

interface Subscriber {
  readonly onRelease: () => void;
  readonly onError: (error: unknown) => void;
}

/**
 * Hears releases (and expiries) of every lease of one process on one etcd watch over the range of
 * lease keys: a deleted key wakes the standbys of that lease at once. etcd3's watcher reconnects by
 * itself and resumes from the revision it last saw, so a release made while it was away is still
 * heard (unless compacted away meanwhile: the standbys' retries cover that).
 */
export class EtcdReleaseWatch {
  readonly #client: Etcd3;
  readonly #keys: EtcdKeys;
  readonly #subscribers = new Map<string, Set<Subscriber>>();
  #watcher: Promise<Watcher> | null = null;

  constructor(client: Etcd3, keys: EtcdKeys) {
    this.#client = client;
    this.#keys = keys;
  }

  /** Calls `onRelease` whenever `lease` is freed; resolves once the watch is established, or failed to be in time. */
  async subscribe(lease: string, subscriber: Subscriber, timeoutMs: number): Promise<() => void> {
    let set = this.#subscribers.get(lease);
    if (set === undefined) this.#subscribers.set(lease, (set = new Set()));
    set.add(subscriber);
    const unsubscribe = () => {
      set.delete(subscriber);
      if (set.size === 0 && this.#subscribers.get(lease) === set) this.#subscribers.delete(lease);
      if (this.#subscribers.size === 0) this.close();
    };
    // A watch that cannot be set up yet is reported and stays wanted: etcd3 keeps dialing, and the
    // standbys' retries take a free lease meanwhile.
    await withTimeout(this.#watch(), timeoutMs, 'watch releases').catch((error: unknown) => subscriber.onError(etcdUnavailable('watch releases', error)));
    return unsubscribe;
  }

  #watch(): Promise<Watcher> {
    this.#watcher ??= this.#client
      .watch()
      .prefix(this.#keys.leases.start.toString())
      .create()
      .then((watcher) => {
        watcher.on('delete', (kv) => {
          for (const s of this.#subscribers.get(this.#keys.leaseName(kv.key)) ?? []) s.onRelease();
        });
        watcher.on('error', (error) => {
          for (const set of this.#subscribers.values()) for (const s of set) s.onError(etcdUnavailable('watch releases', error));
        });
        return watcher;
      });
    const current = this.#watcher;
    current.catch(() => {
      if (this.#watcher === current) this.#watcher = null;
    });
    return current;
  }

  close(): void {
    const watcher = this.#watcher;
    this.#watcher = null;
    void watcher?.then((w) => w.cancel()).catch(() => undefined);
  }
}
