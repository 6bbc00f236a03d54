import type { Token } from '@fenced/shared';

// What the election state machine (coordinator.ts) needs from the store that holds one lease: the
// seam a lease store implements (in its folder under store/; a LeaseBackend opens one per lease).
// Every reply carries the store's clock, which the scheduler's due times are read from. Every store
// passes one conformance suite (test/lease-store/).

/** The store's clock as a reply carried it: seconds and microseconds since the epoch. */
export interface StoreTime {
  readonly sec: string | number;
  readonly usec: string | number;
}

/** The store's clock from microseconds since the epoch (a decimal string: exact), as SQL stores read it. */
export function storeTimeOfMicros(micros: string): StoreTime {
  const us = BigInt(micros);
  return { sec: (us / 1_000_000n).toString(), usec: (us % 1_000_000n).toString() };
}

import type { InFlight } from './in-flight.js';

export type { InFlight } from './in-flight.js';

/** What one acquire came to. */
export type AcquireReply =
  | {
      readonly won: true;
      readonly token: Token;
      /** What renew and release compare: the lease is ours only with this very value. */
      readonly leaseValue: string;
      readonly time: StoreTime;
      /** Writes of an expired term the store ended so that this grant could be made (PostgreSQL). */
      readonly endedWrites?: number;
      /**
       * Whether the server that granted it is the one that counts (Sentinel: the primary the
       * sentinels name), asked when called: null when it is, else the error that says why not.
       */
      confirmServer(): Promise<Error | null>;
    }
  | {
      readonly won: false;
      /** The holder's value, and our own term if the holder is us (a reply we gave up on). */
      readonly holder: { readonly value: string; readonly token: Token; readonly ours: boolean } | null;
      /** How long the holder's lease has left, in milliseconds. */
      readonly remainingMs: number;
      readonly time: StoreTime;
      /** Writes of an expired term the store ended while it waited for the lease (PostgreSQL). */
      readonly endedWrites?: number;
    };

export interface LeaseStore {
  /** One attempt to take the lease for `ttlMs`, minting the next token when it is free. */
  acquire(ttlMs: number, timeoutMs: number, inFlight?: InFlight): Promise<AcquireReply>;
  /**
   * Extends the lease to `ttlMs` from now if it still holds `leaseValue`.
   * @throws when the store cannot answer, or the answer does not count (Sentinel: not the primary).
   */
  renew(leaseValue: string, ttlMs: number, timeoutMs: () => number, inFlight?: InFlight): Promise<{ readonly renewed: boolean; readonly time: StoreTime }>;
  /** Frees the lease if it still holds `leaseValue` and wakes the standbys; true when it did. */
  release(leaseValue: string, timeoutMs: number): Promise<boolean>;
  /** Raises the token counter to at least `floor` (the store forgot tokens a fence remembers). */
  raiseCounter(floor: Token, timeoutMs: number): Promise<void>;
  /** Appends an election to the record operators read (best effort, never awaited). */
  recordElection(entry: { readonly token: Token; readonly ttlMs: number; readonly fences: number; readonly regressed: boolean }): void;
  /**
   * Hears releases of the lease (a standby tries at once), reconnecting by itself after a drop.
   * `onListening` hears how: by notification, or by polling where notifications cannot work.
   */
  listenForReleases(
    timeoutMs: number,
    onRelease: () => void,
    onError: (error: unknown) => void,
    onListening?: (mode: 'notify' | 'polling', reason: string) => void,
  ): Promise<ReleaseListener>;
}

/** A subscription to one lease's releases, on a connection of its own. */
export interface ReleaseListener {
  close(): void;
}
