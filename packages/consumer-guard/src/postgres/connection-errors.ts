// Every node-postgres client the guard holds has an `error` listener for as long as it holds it.
//
// Why: pg-pool listens on a client only while it is idle in the pool and takes that listener off at
// checkout. A client whose backend is killed (pg_terminate_backend, a restart, a failover,
// idle_in_transaction_session_timeout) emits `error`; unheard, an EventEmitter's `error` is thrown,
// and the host process dies. pg-pool's own `pool.query` listens for the query's lifetime and releases
// the client with the error, so the pool destroys it rather than handing it out again; so do we.

/** The parts of an EventEmitter the guard uses on a client or a pool. */
export interface ErrorEmitter {
  on(event: 'error', listener: (err: Error) => void): unknown;
  removeListener(event: 'error', listener: (err: Error) => void): unknown;
}

/** What a checkout heard while it held its client. */
export interface CheckoutWatch {
  /** The error the connection reported while held, if any: the client is broken and must not be reused. */
  lost(): Error | undefined;
  /** Stops listening (just before the client goes back to its pool, which listens from then on). */
  stop(): void;
}

/** Listens on `client` for the checkout's whole lifetime. */
export function watchCheckout(client: object, onLost?: (err: Error) => void): CheckoutWatch {
  const emitter = asEmitter(client);
  let lost: Error | undefined;
  const listener = (err: Error) => {
    // A dying connection can emit more than once (the FATAL message, then the socket's end).
    if (lost !== undefined) return;
    lost = err instanceof Error ? err : new Error(String(err));
    onLost?.(lost);
  };
  emitter?.on('error', listener);
  return {
    lost: () => lost,
    stop: () => void emitter?.removeListener('error', listener),
  };
}

/** A pool's checkout and idle events, as pg-pool emits them. */
interface PoolEvents {
  on(event: 'error', listener: (err: Error, client?: unknown) => void): unknown;
  on(event: 'acquire', listener: (client: unknown) => void): unknown;
  on(event: 'release', listener: (err: Error | undefined, client: unknown) => void): unknown;
}

const watchedPools = new WeakSet<object>();

/**
 * Makes every client of `pool` heard, whoever checks it out: an idle client's error (pg-pool emits it
 * on the pool, and throws it when nothing listens there) and a checked-out client's error (pg-pool
 * listens on nothing then). For pools the guard does not check clients out of itself: a Kysely
 * instance checks its clients out of the `pg.Pool` behind its dialect, where the guard cannot reach
 * them. pg-pool destroys a released client that had a connection error (it is no longer queryable),
 * so a broken one is never handed out again. Idempotent per pool. Returns whether the pool is
 * watched (false for a pool that emits no events): a watched pool already reports each loss.
 */
export function watchPool(pool: object, onError: (err: Error) => void): boolean {
  if (!isPoolEvents(pool)) return false;
  if (watchedPools.has(pool)) return true;
  watchedPools.add(pool);
  const listening = new WeakMap<object, (err: Error) => void>();
  pool.on('error', (err) => onError(err));
  pool.on('acquire', (client) => {
    const emitter = asEmitter(client);
    if (emitter === undefined || listening.has(emitter)) return;
    // A dying connection can emit more than once: one loss, one report, per checkout.
    let heard = false;
    const listener = (err: Error) => {
      if (heard) return;
      heard = true;
      onError(err);
    };
    listening.set(emitter, listener);
    emitter.on('error', listener);
  });
  pool.on('release', (_err, client) => {
    const emitter = asEmitter(client);
    const listener = emitter === undefined ? undefined : listening.get(emitter);
    if (emitter === undefined || listener === undefined) return;
    listening.delete(emitter);
    emitter.removeListener('error', listener);
  });
  return true;
}

function asEmitter(value: unknown): ErrorEmitter | undefined {
  const e = value as Partial<ErrorEmitter> | null;
  return typeof e?.on === 'function' && typeof e.removeListener === 'function' ? (e as ErrorEmitter) : undefined;
}

function isPoolEvents(pool: object): pool is PoolEvents {
  return typeof (pool as { on?: unknown }).on === 'function';
}
