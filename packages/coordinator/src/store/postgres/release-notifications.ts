import { randomBytes } from 'node:crypto';
import { quoteIdent, withTimeout } from '@fenced/shared/internal';
import type { PgLeaseClient, PgLeasePool } from './pg-pool.js';

/** How standbys hear releases: a NOTIFY on a LISTEN connection, or a look every `pollMs`. */
export type ListeningMode = 'notify' | 'polling';

export interface ReleaseNotificationsOptions {
  readonly pool: PgLeasePool;
  readonly channel: string;
  /** `auto`: LISTEN, proven by a probe, polling while it does not work; `poll`: never LISTEN. */
  readonly listen: 'auto' | 'poll';
  readonly pollMs: number;
  /** How long the probe NOTIFY may take to arrive before LISTEN counts as not working here. */
  readonly probeTimeoutMs: number;
  /** The leases among `leases` that are free now (for polling). */
  pollFree(leases: readonly string[]): Promise<readonly string[]>;
}

/** What one subscriber hears. */
export interface ReleaseHandlers {
  onRelease(): void;
  onError(error: unknown): void;
  onListening?(mode: ListeningMode, reason: string): void;
}

/**
 * The releases of every lease of one backend, heard on one connection: `LISTEN` on a client checked
 * out of the pool for as long as anyone listens, with an `error` listener for its whole checkout (a
 * killed backend, a restart, a failover is reported, and the client released with the error so the
 * pool destroys it), then a reconnect with backoff. Releases are NOTIFYs whose payload is the lease.
 *
 * LISTEN is proven, not assumed: after it, a probe NOTIFY is sent through the pool and must arrive.
 * Behind a pooler in transaction mode (PgBouncer) LISTEN is accepted and then silently never
 * delivers, because the server connection goes back to the pooler's pool after each transaction:
 * there the probe does not arrive, and standbys poll instead, said once in a `lease.listening`
 * event. While the connection is down, they poll too, and on reconnecting every lease is looked at
 * once (a release may have been missed meanwhile).
 */
export class ReleaseNotifications {
  readonly #options: ReleaseNotificationsOptions;
  readonly #subscribers = new Map<string, Set<ReleaseHandlers>>();
  #client: PgLeaseClient | undefined;
  #mode: ListeningMode | undefined;
  #starting: Promise<void> | undefined;
  #pollTimer: NodeJS.Timeout | undefined;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #failures = 0;
  #open = false;
  /** Counts closes: a connect that began before the last close keeps nothing it made. */
  #generation = 0;
  /** LISTEN was proven not to deliver here: poll for good. */
  #listenBroken = false;
  /** Clients already given back: their late 'error' or 'end' is old news. */
  readonly #dropped = new WeakSet<PgLeaseClient>();

  constructor(options: ReleaseNotificationsOptions) {
    this.#options = options;
  }

  /** How releases are heard now (undefined before the first subscription has settled). */
  get mode(): ListeningMode | undefined {
    return this.#mode;
  }

  /**
   * Hears `lease`'s releases. Resolves once they are heard (LISTEN proven, or polling), or after
   * `timeoutMs` when the database does not answer: a node must still start, as a standby.
   * @returns an unsubscribe; the connection goes when the last subscriber does.
   */
  async subscribe(lease: string, handlers: ReleaseHandlers, timeoutMs: number): Promise<() => void> {
    let set = this.#subscribers.get(lease);
    if (set === undefined) this.#subscribers.set(lease, (set = new Set()));
    set.add(handlers);
    if (this.#mode !== undefined) handlers.onListening?.(this.#mode, this.#mode === 'notify' ? 'LISTEN in place' : this.#pollingReason());
    if (!this.#open) {
      this.#open = true;
      this.#starting = this.#start();
    }
    await withTimeout(this.#starting!, timeoutMs, 'listen').catch((error: unknown) => handlers.onError(error));
    return () => {
      set.delete(handlers);
      if (set.size === 0) this.#subscribers.delete(lease);
      if (this.#subscribers.size === 0) this.#close();
    };
  }

  async #start(): Promise<void> {
    if (this.#options.listen === 'poll') {
      this.#listenBroken = true;
      this.#setMode('polling', 'listen: poll was chosen');
      return;
    }
    await this.#connect();
  }

  #pollingReason(): string {
    if (this.#options.listen === 'poll') return 'listen: poll was chosen';
    if (this.#listenBroken) return `a NOTIFY sent through the pool did not reach the LISTEN connection within ${this.#options.probeTimeoutMs} ms (a pooler in transaction mode?)`;
    return 'the LISTEN connection is down; reconnecting';
  }

  async #connect(): Promise<void> {
    const generation = this.#generation;
    const current = () => this.#open && this.#generation === generation;
    let client: PgLeaseClient;
    try {
      client = await this.#options.pool.connect();
    } catch (error) {
      if (current()) this.#lost(undefined, error);
      return;
    }
    if (!current()) {
      client.release(true);
      return;
    }
    // Listened to for the whole checkout: an unheard 'error' would kill the host.
    client.on('error', (error?: Error) => this.#lost(client, error ?? new Error('LISTEN connection failed')));
    client.on('end', () => this.#lost(client, new Error('LISTEN connection ended')));
    client.on('notification', (message) => this.#heard(message.payload));
    try {
      await withTimeout(client.query(`LISTEN ${quoteIdent(this.#options.channel)}`), this.#options.probeTimeoutMs, 'LISTEN');
      const delivered = await this.#probe(client);
      if (!current()) {
        this.#drop(client, true);
        return;
      }
      // Lost while probing: the loss was reported and a reconnect is on its way; a probe it kept
      // from arriving says nothing of LISTEN here.
      if (this.#dropped.has(client)) return;
      if (!delivered) {
        this.#listenBroken = true;
        this.#drop(client, true);
        this.#setMode('polling', this.#pollingReason());
        return;
      }
    } catch (error) {
      if (current()) this.#lost(client, error);
      else this.#drop(client, true);
      return;
    }
    this.#client = client;
    this.#failures = 0;
    this.#setMode('notify', 'LISTEN in place');
    // Anything released while nobody listened: look once.
    void this.#poll();
  }

  /**
   * A NOTIFY sent through the pool (another connection) must reach this LISTEN connection. The probe
   * listens on the client itself, for as long as it waits: nothing of it outlives the probe.
   */
  async #probe(client: PgLeaseClient): Promise<boolean> {
    const payload = `:probe:${randomBytes(8).toString('hex')}`;
    let onNotification: (message: { payload?: string | undefined }) => void = () => {};
    const heard = new Promise<true>((resolve) => {
      onNotification = (message) => void (message.payload === payload && resolve(true));
      client.on('notification', onNotification);
    });
    try {
      await withTimeout(this.#options.pool.query('SELECT pg_notify($1, $2)', [this.#options.channel, payload]), this.#options.probeTimeoutMs, 'probe NOTIFY');
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), this.#options.probeTimeoutMs)));
      const arrived = await Promise.race([heard, late]);
      clearTimeout(timer);
      return arrived;
    } finally {
      client.removeListener('notification', onNotification);
    }
  }

  #heard(payload: string | undefined): void {
    if (payload === undefined) return;
    if (payload.startsWith(':probe:')) return; // heard by the probe that sent it
    for (const handlers of this.#subscribers.get(payload) ?? []) handlers.onRelease();
  }

  /** The LISTEN connection failed (or could not be had): poll meanwhile, reconnect with backoff. */
  #lost(client: PgLeaseClient | undefined, error: unknown): void {
    if (client !== undefined) {
      if (this.#dropped.has(client)) return; // an old connection's late news
      this.#drop(client, error instanceof Error ? error : true);
    }
    if (!this.#open) return;
    for (const set of this.#subscribers.values()) for (const handlers of set) handlers.onError(error);
    this.#setMode('polling', this.#pollingReason());
    clearTimeout(this.#reconnectTimer);
    const delay = Math.min(5000, 50 * 2 ** Math.min(this.#failures++, 7));
    this.#reconnectTimer = setTimeout(() => void this.#connect(), delay);
  }

  /** Releases the client with an error, so the pool destroys it: a connection that LISTENs is never reused. */
  #drop(client: PgLeaseClient, error: Error | true): void {
    if (this.#client === client) this.#client = undefined;
    this.#dropped.add(client);
    client.removeAllListeners('notification');
    client.removeAllListeners('end');
    // The 'error' listener stays: a destroyed client can still report its socket's end.
    try {
      client.release(error);
    } catch {
      // Released already (an 'error' and an 'end' for one loss).
    }
  }

  #setMode(mode: ListeningMode, reason: string): void {
    const changed = this.#mode !== mode;
    this.#mode = mode;
    if (mode === 'polling') this.#schedulePoll();
    else clearTimeout(this.#pollTimer);
    if (!changed) return;
    for (const set of this.#subscribers.values()) for (const handlers of set) handlers.onListening?.(mode, reason);
  }

  #schedulePoll(): void {
    clearTimeout(this.#pollTimer);
    if (!this.#open || this.#mode !== 'polling') return;
    this.#pollTimer = setTimeout(() => void this.#poll().finally(() => this.#schedulePoll()), this.#options.pollMs);
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
    for (const lease of free) for (const handlers of this.#subscribers.get(lease) ?? []) handlers.onRelease();
  }

  #close(): void {
    this.#open = false;
    this.#generation++;
    this.#mode = undefined;
    this.#starting = undefined;
    this.#listenBroken = false;
    clearTimeout(this.#pollTimer);
    clearTimeout(this.#reconnectTimer);
    const client = this.#client;
    if (client !== undefined) this.#drop(client, true);
  }
}
