/**
 * Whole-process pauses for the deterministic simulation: one node's every timer and every reply held
 * while the others run on, as SIGSTOP (or a long GC pause, or a VM frozen by its host) holds a real
 * process, then all of them let go at once on resume: first the replies it waits for through
 * {@link ProcessPauses.gate} (a lock granted to it), as Node woken in its loop's poll phase runs what
 * arrived on its sockets before the timers that fell due; then its held timers and notices, in the
 * order they fell due.
 *
 * The nodes share one process and one virtual clock, so a timer does not say whose it is: each node
 * runs inside an `AsyncLocalStorage` context of its own (its slot), which follows its promises, and the
 * timer functions are wrapped to note the slot a timer was set in and to run its callback there. A
 * callback that falls due while its node is paused is held; on resume each held one is set again for
 * now, in order (as immediates), so the microtasks of one run before the next as Node runs them. The lease store's
 * release notices and the fence store's lock grants reach a node from another node's context: they
 * are delivered through {@link ProcessPauses.deliver} and {@link ProcessPauses.gate}, which hold them
 * too.
 *
 * What still runs in a paused node: a promise another node settles directly (a write whose session
 * the takeover ended). That is a step the node could have taken just before it was paused, so a
 * pause with such a gap is still a schedule a real process can follow: it narrows what the fault
 * reaches, never makes a run the real system could not have.
 *
 * The context costs every promise a hook, so only schedules that draw a pause install it.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

type Timer = ReturnType<typeof setTimeout>;
type Schedule = (callback: () => void, ms?: number) => Timer;
type Cancel = (timer: Timer | undefined) => void;
type Fakes = Pick<typeof globalThis, 'setTimeout' | 'clearTimeout' | 'setImmediate' | 'clearImmediate'>;

export class ProcessPauses {
  readonly #context = new AsyncLocalStorage<number>();
  readonly #paused = new Set<number>();
  /** Per paused slot: the callbacks that fell due, in order, each with the timer it came from. */
  readonly #held = new Map<number, Array<{ readonly timer: Timer | undefined; readonly run: () => void }>>();
  /** Per paused slot: whoever waits for it to run again (a lock granted to it). */
  readonly #resumed = new Map<number, Array<() => void>>();
  /** A held timer set again on resume: the timer its node holds, and the one that will now fire. */
  readonly #reset = new WeakMap<object, Timer>();
  /** The (fake) timer functions found on `globalThis` at install, which the wrappers call. */
  #fakes: Fakes | undefined;

  /** Wraps the (fake) timer functions on `globalThis`; {@link uninstall} puts them back. */
  install(): void {
    const fakes: Fakes = { setTimeout: globalThis.setTimeout, clearTimeout: globalThis.clearTimeout, setImmediate: globalThis.setImmediate, clearImmediate: globalThis.clearImmediate };
    this.#fakes = fakes;
    const fakeSetTimeout = fakes.setTimeout as unknown as Schedule;
    const fakeClearTimeout = fakes.clearTimeout as unknown as Cancel;
    const fakeSetImmediate = fakes.setImmediate as unknown as (callback: () => void) => Timer;
    const fakeClearImmediate = fakes.clearImmediate as unknown as Cancel;
    /** Sets `run` through `schedule` as the current node's (held while it is paused), or as no node's. */
    const scheduleAs = (schedule: (callback: () => void) => Timer, run: () => void): Timer => {
      const slot = this.#context.getStore();
      if (slot === undefined) return schedule(run);
      const timer: Timer = schedule(() => this.#due(slot, timer, run));
      return timer;
    };
    const cancel = (clear: Cancel) => (timer: Timer | undefined) => {
      if (timer !== undefined && typeof timer === 'object') {
        for (const held of this.#held.values()) {
          const at = held.findIndex((h) => h.timer === timer);
          if (at >= 0) held.splice(at, 1);
        }
        const reset = this.#reset.get(timer);
        if (reset !== undefined) fakeClearImmediate(reset);
      }
      clear(timer);
    };
    globalThis.setTimeout = ((callback: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => scheduleAs((run) => fakeSetTimeout(run, ms), () => callback(...args))) as unknown as typeof setTimeout;
    globalThis.setImmediate = ((callback: (...args: unknown[]) => void, ...args: unknown[]) => scheduleAs((run) => fakeSetImmediate(run), () => callback(...args))) as unknown as typeof setImmediate;
    globalThis.clearTimeout = cancel(fakeClearTimeout) as typeof clearTimeout;
    globalThis.clearImmediate = cancel(fakeClearImmediate) as typeof clearImmediate;
  }

  uninstall(): void {
    if (this.#fakes !== undefined) Object.assign(globalThis, this.#fakes);
    this.#fakes = undefined;
    this.#context.disable();
  }

  /** Runs `fn` as node `slot`: every timer and promise it starts is that node's. */
  runAs<T>(slot: number, fn: () => T): T {
    return this.#context.run(slot, fn);
  }

  /** Runs `callback` as node `slot` now, or on its resume if it is paused (a notice it was sent). */
  deliver(slot: number, callback: () => void): void {
    this.#due(slot, undefined, callback);
  }

  /** Resolves at once if node `slot` runs, or on its resume (a reply it was sent while paused). */
  gate(slot: number): Promise<void> {
    if (!this.#paused.has(slot)) return Promise.resolve();
    return new Promise((resolve) => {
      const waiting = this.#resumed.get(slot) ?? [];
      waiting.push(resolve);
      this.#resumed.set(slot, waiting);
    });
  }

  isPaused(slot: number): boolean {
    return this.#paused.has(slot);
  }

  pause(slot: number): void {
    this.#paused.add(slot);
  }

  /** Lets node `slot` run again: what fell due while it was paused runs now, in order. */
  resume(slot: number): void {
    if (!this.#paused.delete(slot)) return;
    const held = this.#held.get(slot) ?? [];
    this.#held.delete(slot);
    const setImmediate = this.#fakes?.setImmediate as unknown as (callback: () => void) => Timer;
    for (const { timer, run } of held) {
      // Immediates, not timeouts of 0 (which fire a millisecond on): Node runs every timer that fell
      // due during a pause on the first turn of its loop after it.
      const again = setImmediate(() => this.#due(slot, timer, run));
      if (timer !== undefined && typeof timer === 'object') this.#reset.set(timer, again);
    }
    const waiting = this.#resumed.get(slot) ?? [];
    this.#resumed.delete(slot);
    for (const resolve of waiting) this.runAs(slot, resolve);
  }

  /** The node in `slot` crashed: what it held dies with it, and its next incarnation is not paused. */
  forget(slot: number): void {
    this.#paused.delete(slot);
    this.#held.delete(slot);
    this.#resumed.delete(slot);
  }

  #due(slot: number, timer: Timer | undefined, run: () => void): void {
    if (!this.#paused.has(slot)) {
      this.runAs(slot, run);
      return;
    }
    const held = this.#held.get(slot) ?? [];
    held.push({ timer, run });
    this.#held.set(slot, held);
  }
}
