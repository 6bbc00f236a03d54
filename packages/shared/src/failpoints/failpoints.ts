/**
 * Failpoints: named moments in the SDK where a test or the simulation stops, kills or delays this
 * process, or runs a callback, exactly there (etcd's gofail is the model). Faults that land at random
 * moments rarely hit the few milliseconds that matter; a failpoint makes them land there every time.
 *
 * Off unless armed, and armed only through this module (`@fenced/shared/failpoints`): no option or
 * environment variable turns one on, so a user's configuration cannot by accident. When none is
 * armed, a call site costs one property read: every site is written
 * `if (failpoints.armed) await failpoints.hit('…')`, so nothing is awaited on the hot path.
 */

/** Where the SDK can be stopped. Each name says what has happened and what has not yet. */
export const FAILPOINT_NAMES = [
  /** An acquire was sent; its reply not yet read. */
  'lease.acquire-sent-before-reply',
  /** The acquire reply said "elected"; nothing dispatched yet (the fences not advanced either). */
  'lease.acquired-before-dispatch',
  /** A renew was sent; its reply not yet read. */
  'lease.renew-sent-before-reply',
  /** A fire's handler returned; the fire is not yet recorded as dispatched in Redis. */
  'scheduler.dispatched-before-record',
  /** A catch-up batch dispatched its first fire; the rest are still to go. */
  'scheduler.mid-catch-up',
  /** The handler's Redis pre-check passed; its write has not started. */
  'handler.prechecked-before-write',
  /** Inside the write's transaction: the fence checked and the user's statements run; no COMMIT yet. */
  'guard.checked-before-commit',
  /** The write committed; the Redis fast-path mark not yet raised. */
  'guard.committed-before-mark',
  /**
   * An election's takeover on MySQL (the guard's advance, or the MySQL lease store's grant) found the
   * sessions of an older term that block it; none of them ended yet (PostgreSQL finds and ends them
   * in one statement: nothing lies between).
   */
  'takeover.blockers-found-before-end',
  /** A fenced HTTP call's headers (its fire, its token) are on the wire; its body not yet sent. */
  'http.headers-sent-before-body',
] as const;

export type FailpointName = (typeof FAILPOINT_NAMES)[number];

export type FailpointAction =
  /** SIGSTOP to this process: everything freezes (timers too) until someone sends SIGCONT. */
  | { readonly kind: 'stop' }
  /** SIGKILL to this process. */
  | { readonly kind: 'kill' }
  /** Waits this long, the rest of the process running on. */
  | { readonly kind: 'delay'; readonly ms: number }
  /**
   * Blocks the event loop this long (a busy loop): nothing else in the process runs, timers included,
   * as under CPU starvation or a long garbage collection, while the process stays runnable.
   */
  | { readonly kind: 'stall'; readonly ms: number }
  /** Awaits a callback (an in-process test holds the moment open while it acts). */
  | { readonly kind: 'call'; readonly run: () => Promise<void> | void };

/** One time a failpoint fired: reported to the listeners before its action runs. */
export interface FailpointHit {
  readonly name: FailpointName;
  readonly action: FailpointAction['kind'];
}

interface Armed {
  readonly action: FailpointAction;
  /** Hits left before it disarms itself. */
  remaining: number;
}

class Failpoints {
  readonly #armed = new Map<FailpointName, Armed>();
  readonly #listeners = new Set<(hit: FailpointHit) => void>();
  /** Whether any failpoint is armed: what every call site reads before it awaits `hit`. */
  armed = false;

  /**
   * Arms `name` for its next `times` hits (default 1). Throws a TypeError for an unknown name or a
   * bad count, and arms nothing then.
   */
  arm(name: FailpointName, action: FailpointAction, times = 1): void {
    if (!(FAILPOINT_NAMES as readonly string[]).includes(name)) throw new TypeError(`unknown failpoint ${JSON.stringify(name)}: choose from ${FAILPOINT_NAMES.join(', ')}`);
    if (!Number.isSafeInteger(times) || times < 1) throw new TypeError(`a failpoint fires a whole number of times, at least once, not ${String(times)}`);
    if ((action.kind === 'delay' || action.kind === 'stall') && !(Number.isFinite(action.ms) && action.ms >= 0)) {
      throw new TypeError(`a failpoint ${action.kind} is a number of ms >= 0, not ${String(action.ms)}`);
    }
    this.#armed.set(name, { action, remaining: times });
    this.armed = true;
  }

  disarm(name?: FailpointName): void {
    if (name === undefined) this.#armed.clear();
    else this.#armed.delete(name);
    this.armed = this.#armed.size > 0;
  }

  /** Calls `listener` for every hit, before the action runs (a stopped process cannot report after). */
  onHit(listener: (hit: FailpointHit) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Runs the action armed at `name`, if any. Call only behind `if (failpoints.armed)`. */
  async hit(name: FailpointName): Promise<void> {
    const armed = this.#armed.get(name);
    if (armed === undefined) return;
    if (--armed.remaining === 0) this.disarm(name);
    for (const listener of this.#listeners) listener({ name, action: armed.action.kind });
    const action = armed.action;
    switch (action.kind) {
      case 'stop':
        process.kill(process.pid, 'SIGSTOP');
        return;
      case 'kill':
        process.kill(process.pid, 'SIGKILL');
        // SIGKILL to oneself is delivered at once; nothing after it runs.
        return new Promise<never>(() => {});
      case 'delay':
        await new Promise((r) => setTimeout(r, action.ms));
        return;
      case 'stall':
        stall(action.ms);
        return;
      case 'call':
        await action.run();
        return;
    }
  }
}

/** Keeps this thread busy for `ms` (monotonic), running nothing else: a starved event loop. */
export function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: that is the fault
  }
}

/**
 * The process's failpoints: one registry for every fenced package in it, even when a project ends up
 * with two copies of this package (kept on a global symbol).
 */
export const failpoints: Failpoints = ((globalThis as Record<symbol, unknown>)[Symbol.for('fenced.failpoints')] ??= new Failpoints()) as Failpoints;
export type { Failpoints };
