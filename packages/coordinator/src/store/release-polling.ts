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
  /**
   * The leases among `leases` that are free now, each with the term it is free after (its last
   * token, as text): one request for all of them.
   */
  pollFree(leases: readonly string[]): Promise<ReadonlyArray<{ readonly lease: string; readonly term: string }>>;
}

/**
 * The releases of every lease of one backend, heard by looking: every `pollMs`, one request asks
 * which of the leases anyone listens to are free, and after which term. Each subscriber hears a
 * lease once per term it finds it free after: a lease released (or expired) hears once however many
 * looks find it still free, again when it is found free after a later term (taken and released
 * between two looks), and a subscriber that joins while a lease is free hears it at its first look
 * (a standby that subscribes should try it). A lease released and taken again between two looks is
 * not heard: it is held. For a store that cannot push a release to a standby (MySQL/MariaDB has no
 * LISTEN/NOTIFY): a handover then takes at most one poll after the release (half of one on average),
 * at one request per poll per process, however many leases it listens to. The looks run only while
 * someone listens.
 */
export class ReleasePolling {
  readonly #options: ReleasePollingOptions;
  /** Each lease's subscribers, with the term each last heard it free after (undefined: none yet). */
  readonly #subscribers = new Map<string, Map<PolledReleaseHandlers, string | undefined>>();
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
    let subscribers = this.#subscribers.get(lease);
    if (subscribers === undefined) this.#subscribers.set(lease, (subscribers = new Map()));
    subscribers.set(handlers, undefined);
    handlers.onListening?.('polling', this.#options.reason);
    if (this.#timer === undefined && !this.#looking) this.#schedule();
    return () => {
      subscribers.delete(handlers);
      if (subscribers.size === 0 && this.#subscribers.get(lease) === subscribers) this.#subscribers.delete(lease);
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
    let free: ReadonlyArray<{ lease: string; term: string }>;
    try {
      free = await this.#options.pollFree(leases);
    } catch (error) {
      for (const subscribers of this.#subscribers.values()) for (const handlers of subscribers.keys()) handlers.onError(error);
      return;
    }
    for (const { lease, term } of free) {
      const subscribers = this.#subscribers.get(lease);
      if (subscribers === undefined) continue;
      for (const [handlers, heard] of [...subscribers]) {
        if (heard === term || !subscribers.has(handlers)) continue;
        subscribers.set(handlers, term);
        handlers.onRelease();
      }
    }
  }
}
