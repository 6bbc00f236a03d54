/**
 * The world one schedule of the deterministic simulation runs in: every timer and clock virtual
 * (`@sinonjs/fake-timers`) and every random choice drawn from one seed, the SDK's own jitter
 * (`Math.random`) included. One seed, one run, exactly. `leave()` puts the real ones back.
 */
import FakeTimers, { type Clock } from '@sinonjs/fake-timers';
import { seededRandom } from '@fenced/chaos';

/** Where virtual time starts: a whole second, so fires fall on the grid from the start. */
export const T0 = Date.UTC(2026, 11, 4, 12, 0, 0);

/** A stream of draws in [0, 1) from one seed (mulberry32, `pnpm sim`'s generator): the same seed, the same draws. */
export function drawsFrom(seed: number): () => number {
  return seededRandom(seed).next;
}

export interface VirtualWorld {
  /** The seed's stream, which `Math.random` also draws from while the world lasts. */
  readonly random: () => number;
  /** A whole number in [low, high), from the seed's stream. */
  readonly between: (low: number, high: number) => number;
  readonly clock: Clock;
  /** Puts the real timers, clock, `setImmediate` and `Math.random` back. */
  leave(): void;
}

/** Enters a world for `seed`, its virtual clock at `T0`. */
export function enterVirtualWorld(seed: number): VirtualWorld {
  const random = drawsFrom(seed);
  const realRandom = Math.random;
  Math.random = random;
  // fake-timers yields to the real event loop between timers (with the setImmediate it finds when
  // it is installed) so that the promises a timer settles run before the next timer: one loop
  // iteration, an epoll call, per virtual timer (a profile showed the thread idle 35-45 % of the
  // time). Everything here is in memory, so the yield needs only the microtasks drained: it is
  // handed a yield that waits for that and no more (10,014-11,346 schedules a minute before,
  // 12,927-13,733 after, quiet, 3,000 seeds each), and the real setImmediate is put back after.
  const realSetImmediate = globalThis.setImmediate;
  globalThis.setImmediate = afterMicrotasks as unknown as typeof setImmediate;
  const clock = FakeTimers.withGlobal(globalThis).install({
    now: T0,
    toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'clearImmediate', 'Date', 'performance'],
    loopLimit: 1_000_000,
  });
  return {
    random,
    between: (low, high) => Math.floor(low + random() * (high - low)),
    clock,
    leave() {
      clock.uninstall();
      globalThis.setImmediate = realSetImmediate;
      Math.random = realRandom;
    },
  };
}

/**
 * Calls `callback` once every microtask queued before it, and every one those queue, has run: a
 * microtask that defers to the next tick, since Node drains the whole microtask queue before it
 * looks at the tick queue again (from a tick callback too: a tick queued from a tick callback
 * directly would run before the microtasks the first one queued).
 */
function afterMicrotasks(callback: () => void): void {
  queueMicrotask(() => process.nextTick(callback));
}

/**
 * `target` with some methods replaced (the per-node view of a store the nodes share); its other
 * methods bound to it, once each: a node calls them on every request.
 */
export function withOverrides<T extends object>(target: T, overrides: Partial<Record<keyof T, unknown>>): T {
  const bound = new Map<PropertyKey, unknown>(Object.entries(overrides));
  return new Proxy(target, {
    get: (on, key) => {
      if (bound.has(key)) return bound.get(key);
      const value: unknown = Reflect.get(on, key);
      if (typeof value !== 'function') return value;
      const method = value.bind(on);
      bound.set(key, method);
      return method;
    },
  });
}
