import type { Clock } from '../internal/timing.js';

/**
 * The Redis server's clock, carried forward on this process's monotonic clock between samples. Due
 * times come from here, not from each replica's wall clock, so a replica whose clock is wrong
 * neither fires early nor late. Each sample is the server's TIME taken inside a script, placed at
 * the midpoint of the request's round trip.
 */
export class ServerClock {
  #serverMs: number | null = null;
  #monoAtSample = 0;

  constructor(private readonly clock: Clock) {}

  /** Records a sample from a script reply (TIME: seconds and microseconds as decimal strings). */
  sample(seconds: string | number, micros: string | number, sentAt: number, receivedAt: number): void {
    this.#serverMs = Number(seconds) * 1000 + Number(micros) / 1000;
    this.#monoAtSample = (sentAt + receivedAt) / 2;
  }

  /** The server's time now in epoch milliseconds, or null before the first sample. */
  now(): number | null {
    if (this.#serverMs === null) return null;
    return this.#serverMs + (this.clock.now() - this.#monoAtSample);
  }
}
