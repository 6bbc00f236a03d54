import type { StoreTime } from '../lease-store.js';
import { monotonicClock } from '../../internal/clock.js';

/**
 * Where the scheduler's due times come from on etcd, which has no clock a client can read.
 *
 * - `'local'`: this host's clock. Every replica must then keep its clock right (NTP); a replica whose
 *   clock runs ahead fires early while it leads. `fenced doctor` reports each host's offset.
 * - a `read` function: another server's clock, in epoch milliseconds. `postgresClock(pool)` (from
 *   `@fenced/coordinator/postgres`) reads the fence database's, so that every replica judges due
 *   times by one clock, the one the guarded writes are committed by, as on Redis and PostgreSQL.
 */
export type EtcdTimeSource = 'local' | { readonly read: (timeoutMs: number) => Promise<number> };

/** How long a sample of a remote clock is carried forward on the monotonic clock before it is read again. */
const RESAMPLE_MS = 1000;
/** How long a sample may be carried forward while the clock cannot be read (one failed read should not end a term). */
const STALE_LIMIT_MS = 30_000;

/**
 * The time source, read as each reply's store time. A remote clock is sampled at most once a second
 * and carried forward on this process's monotonic clock, the sample counted as taken when its reply
 * arrived: never ahead of the remote clock (see server-clock.ts).
 */
export class EtcdClock {
  readonly #source: EtcdTimeSource;
  #sample: { ms: number; at: number } | null = null;
  #reading: Promise<void> | null = null;

  constructor(source: EtcdTimeSource) {
    this.#source = source;
  }

  async now(timeoutMs: number): Promise<StoreTime> {
    if (this.#source === 'local') return fromMs(Date.now());
    const age = this.#sample === null ? Infinity : monotonicClock.now() - this.#sample.at;
    if (age >= RESAMPLE_MS) {
      try {
        await this.#read(timeoutMs);
      } catch (error) {
        if (this.#sample === null || monotonicClock.now() - this.#sample.at > STALE_LIMIT_MS) throw error;
      }
    }
    const sample = this.#sample!;
    return fromMs(sample.ms + (monotonicClock.now() - sample.at));
  }

  #read(timeoutMs: number): Promise<void> {
    const source = this.#source as Exclude<EtcdTimeSource, 'local'>;
    this.#reading ??= source
      .read(timeoutMs)
      .then((ms) => {
        this.#sample = { ms, at: monotonicClock.now() };
      })
      .finally(() => {
        this.#reading = null;
      });
    return this.#reading;
  }
}

function fromMs(ms: number): StoreTime {
  const us = Math.floor(ms * 1000);
  return { sec: Math.floor(us / 1_000_000), usec: us % 1_000_000 };
}
