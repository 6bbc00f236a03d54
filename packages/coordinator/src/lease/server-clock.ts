import type { Clock } from '../internal/clock.js';

/**
 * The Redis server's clock, carried forward on this process's monotonic clock between samples. Due
 * times come from here, not from each replica's wall clock, so a replica whose clock is wrong
 * neither fires early nor late.
 *
 * Each sample is the server's TIME, read inside a script somewhere between the moment the request
 * left and the moment its reply arrived. The estimate must never run ahead of the server (a fire
 * would start early), so a sample counts as taken when its reply arrived: the server's clock had
 * reached at least that reading by then. A slow round trip makes the estimate late by up to the
 * round trip, never early. (Placing the reading at the round trip's midpoint, as NTP does, runs
 * ahead whenever the request spent longer on its way out than the reply on its way back, as in a
 * busy event loop or a congested link.)
 */
export class ServerClock {
  #serverMs: number | null = null;
  #monoAtSample = 0;

  constructor(private readonly clock: Clock) {}

  /** Records a sample from a script reply (TIME: seconds and microseconds as decimal strings). */
  sample(seconds: string | number, micros: string | number, receivedAt: number): void {
    this.#serverMs = Number(seconds) * 1000 + Number(micros) / 1000;
    this.#monoAtSample = receivedAt;
  }

  /** The server's time now in epoch milliseconds (never ahead of it), or null before the first sample. */
  now(): number | null {
    if (this.#serverMs === null) return null;
    return this.#serverMs + (this.clock.now() - this.#monoAtSample);
  }
}
