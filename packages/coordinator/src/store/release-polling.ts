/** What one subscriber to a lease's releases hears. */
export interface PolledReleaseHandlers {
  onRelease(): void;
  onError(error: unknown): void;
  onListening?(mode: 'polling', reason: string): void;
}

export interface ReleasePollingOptions {
  /** How often to look. */
  readonly pollMs: number;
  /** Why releases are polled for here (said once to each subscriber, in `lease.listening`). */
  readonly reason: string;
  /** The leases among `leases` that are free now: one request for all of them. */
  pollFree(leases: readonly string[]): Promise<readonly string[]>;
}

/**
 * The releases of every lease of one backend, heard by looking: every `pollMs`, one request asks
 * which of the leases anyone listens to are free, and the subscribers of a lease that was not free
 * at the look before hear a release, once (a lease free at the first look counts as released: a
 * standby that subscribes should try it). An expiry is heard the same way. For a store
 * that cannot push a release to a standby (MySQL/MariaDB has no LISTEN/NOTIFY): a handover then
 * takes at most one poll after the release (half of one on average), at one request per poll per
 * process, however many leases it listens to. The looks run only while someone listens.
 */
export class ReleasePolling {
  readonly #options: ReleasePollingOptions;
  readonly #subscribers = new Map<string, Set<PolledReleaseHandlers>>();
  /** The leases found free at the last look (heard already). */
  readonly #free = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  /** A look is running: the next one is scheduled when it ends. */
  #looking = false;

  constructor(options: ReleasePollingOptions) {
    this.#options = options;
  }

  /**
   * Hears `lease`'s releases from the next look on. Resolves at once: nothing needs to connect first.
   * @returns an unsubscribe; the looks stop when the last subscriber goes.
   */
  async subscribe(lease: string, handlers: PolledReleaseHandlers): Promise<() => void> {
    let set = this.#subscribers.get(lease);
    if (set === undefined) this.#subscribers.set(lease, (set = new Set()));
    set.add(handlers);
    handlers.onListening?.('polling', this.#options.reason);
    if (this.#timer === undefined && !this.#looking) this.#schedule();
    return () => {
      set.delete(handlers);
      if (set.size === 0) {
        this.#subscribers.delete(lease);
        this.#free.delete(lease);
      }
      if (this.#subscribers.size === 0) {
        clearTimeout(this.#timer);
        this.#timer = undefined;
      }
    };
  }

  #schedule(): void {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#looking = true;
      void this.#poll().finally(() => {
        this.#looking = false;
        if (this.#subscribers.size > 0) this.#schedule();
      });
    }, this.#options.pollMs);
  }

  async #poll(): Promise<void> {
    const leases = [...this.#subscribers.keys()];
    if (leases.length === 0) return;
    let free: readonly string[];
    try {
      free = await this.#options.pollFree(leases);
    } catch (error) {
      for (const set of this.#subscribers.values()) for (const handlers of set) handlers.onError(error);
      return;
    }
    const freeNow = new Set(free);
    for (const lease of leases) {
      if (!freeNow.has(lease)) this.#free.delete(lease);
      else if (!this.#free.has(lease) && this.#subscribers.has(lease)) {
        this.#free.add(lease);
        for (const handlers of this.#subscribers.get(lease) ?? []) handlers.onRelease();
      }
    }
  }
}
