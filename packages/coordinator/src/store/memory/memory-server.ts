import { MAX_TOKEN, type Token } from '@fenced/shared';
import type { StoreTime } from '../lease-store.js';

// The state an in-memory lease store keeps: what a Redis or PostgreSQL server would hold, held by
// one object that every "process" of a test (one `memoryLeases({ server })` each) shares. Every
// operation is one synchronous step on it, so each is atomic as a Lua script or a transaction is.

/** One lease's row: its holder (while it lives), and its token counter, which only grows. */
interface LeaseRow {
  holder: { readonly value: string; readonly token: Token; expiresAt: number } | null;
  counter: bigint;
}

/** One election as operators read it (the last ones kept, as the other stores keep them). */
export interface MemoryElection {
  readonly lease: string;
  readonly token: Token;
  readonly nodeId: string;
  readonly ttlMs: number;
  readonly fences: number;
  readonly regressed: boolean;
  readonly at: number;
}

const ELECTIONS_KEPT = 32;

/**
 * What a server held at one moment (`server.snapshot()`): an asynchronous replica's copy, for
 * `server.failOver(snapshot)` to go back to. Opaque: only the server reads it.
 */
export interface MemoryLeaseSnapshot {
  readonly leases: ReadonlyMap<string, LeaseRow>;
  readonly fireLogs: ReadonlyMap<string, ReadonlyMap<string, string>>;
  readonly groups: ReadonlyMap<string, ReadonlyMap<string, number>>;
}

export interface MemoryLeaseServerOptions {
  /**
   * The server's clock, epoch milliseconds: expiry and every reply's time are read from it.
   * @defaultValue `Date.now` (faked by `@sinonjs/fake-timers` where a test installs it)
   */
  readonly now?: () => number;
}

/**
 * The shared state of the in-memory lease store: leases, token counters, the scheduler's fire logs,
 * lease groups' member lists, and who listens for releases. Give one to every `memoryLeases` that
 * should see the same leases (the processes of one test).
 */
export class MemoryLeaseServer {
  readonly #now: () => number;
  readonly #leases = new Map<string, LeaseRow>();
  readonly #fireLogs = new Map<string, Map<string, string>>();
  readonly #groups = new Map<string, Map<string, number>>();
  readonly #listeners = new Map<string, Set<() => void>>();
  readonly #elections = new Map<string, MemoryElection[]>();

  constructor(options: MemoryLeaseServerOptions = {}) {
    this.#now = options.now ?? Date.now;
  }

  /** The server's clock now, epoch ms. */
  now(): number {
    return this.#now();
  }

  /** The server's clock as replies carry it. */
  time(): StoreTime {
    const ms = this.#now();
    return { sec: Math.floor(ms / 1000), usec: Math.floor(ms % 1000) * 1000 };
  }

  #row(lease: string): LeaseRow {
    let row = this.#leases.get(lease);
    if (row === undefined) {
      row = { holder: null, counter: 0n };
      this.#leases.set(lease, row);
    }
    return row;
  }

  /**
   * The row's holder while its lease lives: one past its time is no holder, as an expired Redis key
   * is none. Judged at every step by the clock of that step; reading never changes the row.
   */
  #live(row: LeaseRow): LeaseRow['holder'] {
    return row.holder !== null && row.holder.expiresAt > this.#now() ? row.holder : null;
  }

  /** The holder of `lease` while its lease lives, with the milliseconds it has left; null when free. */
  holder(lease: string): { readonly value: string; readonly token: Token; readonly remainingMs: number } | null {
    const holder = this.#live(this.#row(lease));
    return holder === null ? null : { value: holder.value, token: holder.token, remainingMs: holder.expiresAt - this.#now() };
  }

  /**
   * Grants a free lease to `valueOf(token)` for `ttlMs`, minting the next token: one step, so no
   * acquirer can hold a token minted after a later election's. Null when it is held.
   * @throws RangeError when the counter is at 2^63 - 1 (no token is left to mint; nothing changes).
   */
  grant(lease: string, ttlMs: number, valueOf: (token: Token) => string): { readonly token: Token; readonly value: string } | null {
    const row = this.#row(lease);
    if (this.#live(row) !== null) return null;
    const next = row.counter + 1n;
    if (next > MAX_TOKEN) throw new RangeError(`the token counter of ${lease} is at 2^63 - 1`);
    row.counter = next;
    const token = next as Token;
    const value = valueOf(token);
    row.holder = { value, token, expiresAt: this.#now() + ttlMs };
    return { token, value };
  }

  /** Extends the lease to `ttlMs` from now if `value` holds it and it still lives. */
  extend(lease: string, value: string, ttlMs: number): boolean {
    const holder = this.#live(this.#row(lease));
    if (holder === null || holder.value !== value) return false;
    holder.expiresAt = this.#now() + ttlMs;
    return true;
  }

  /** Frees the lease if `value` holds it, and wakes whoever listens for its releases. */
  free(lease: string, value: string): boolean {
    const row = this.#row(lease);
    const holder = this.#live(row);
    if (holder === null || holder.value !== value) return false;
    row.holder = null;
    // Heard after the release's own reply, as a published message is.
    for (const listener of this.#listeners.get(lease) ?? []) setImmediate(listener);
    return true;
  }

  /** What the server holds now: the copy an asynchronous replica would have, for {@link failOver}. */
  snapshot(): MemoryLeaseSnapshot {
    return copyState({ leases: this.#leases, fireLogs: this.#fireLogs, groups: this.#groups });
  }

  /**
   * A failover to a replica that had only `snapshot`: every lease (holder and token counter), fire
   * log and lease group's member list goes back to it, and what was written since is lost, as when
   * Redis fails over to an asynchronous replica. Subscriptions stay (a process re-subscribes to the
   * new primary); no release is announced. The fences beside the store keep what they committed:
   * the coordinator's repair above them is what this lets a test check.
   */
  failOver(snapshot: MemoryLeaseSnapshot): void {
    const state = copyState(snapshot);
    replaceEntries(this.#leases, state.leases);
    replaceEntries(this.#fireLogs, state.fireLogs);
    replaceEntries(this.#groups, state.groups);
  }

  /** Raises the token counter of `lease` to at least `floor`. */
  raiseCounter(lease: string, floor: Token): void {
    const row = this.#row(lease);
    if (row.counter < floor) row.counter = floor;
  }

  recordElection(election: MemoryElection): void {
    const kept = this.#elections.get(election.lease) ?? [];
    kept.push(election);
    if (kept.length > ELECTIONS_KEPT) kept.splice(0, kept.length - ELECTIONS_KEPT);
    this.#elections.set(election.lease, kept);
  }

  /** The last elections of `lease`, oldest first. */
  elections(lease: string): readonly MemoryElection[] {
    return [...(this.#elections.get(lease) ?? [])];
  }

  /** Every lease the server has seen, sorted. */
  leaseNames(): string[] {
    return [...this.#leases.keys()].sort();
  }

  /** @returns an unsubscribe. */
  listen(lease: string, onRelease: () => void): () => void {
    let listeners = this.#listeners.get(lease);
    if (listeners === undefined) {
      listeners = new Set();
      this.#listeners.set(lease, listeners);
    }
    listeners.add(onRelease);
    return () => {
      listeners.delete(onRelease);
      // Only its own set: an unsubscribe called again after the lease's listeners were replaced by
      // a new set must not take the new listeners' set away.
      if (listeners.size === 0 && this.#listeners.get(lease) === listeners) this.#listeners.delete(lease);
    };
  }

  /** The fields of the fire log of `lease` (a copy). */
  fireLog(lease: string): Record<string, string> {
    return Object.fromEntries(this.#fireLogs.get(lease) ?? []);
  }

  /** Sets fields of the fire log of `lease` if `value` holds the lease: one step, checked and written. */
  writeFireLog(lease: string, value: string, fields: (current: ReadonlyMap<string, string>) => ReadonlyMap<string, string>): boolean {
    const holder = this.#live(this.#row(lease));
    if (holder === null || holder.value !== value) return false;
    const log = this.#fireLogs.get(lease) ?? new Map<string, string>();
    for (const [field, text] of fields(log)) log.set(field, text);
    this.#fireLogs.set(lease, log);
    return true;
  }

  /**
   * Keeps `member` of `group` live for `ttlMs` from now and returns the live members, sorted, and
   * after how long the first other member expires (-1: no other member).
   */
  beat(group: string, member: string, ttlMs: number): { members: string[]; nextExpiryMs: number } {
    const now = this.#now();
    const members = this.#liveMembers(group, now);
    members.set(member, now + ttlMs);
    let nextExpiryMs = -1;
    for (const [other, expiresAt] of members) {
      if (other === member) continue;
      const left = expiresAt - now;
      if (nextExpiryMs < 0 || left < nextExpiryMs) nextExpiryMs = left;
    }
    return { members: [...members.keys()].sort(), nextExpiryMs };
  }

  leave(group: string, member: string): void {
    this.#groups.get(group)?.delete(member);
  }

  #liveMembers(group: string, now: number): Map<string, number> {
    let members = this.#groups.get(group);
    if (members === undefined) {
      members = new Map();
      this.#groups.set(group, members);
    }
    for (const [member, expiresAt] of members) if (expiresAt <= now) members.delete(member);
    return members;
  }
}

/** A deep copy of a server's state: rows and maps are mutated in place, so a snapshot shares none. */
function copyState({ leases, fireLogs, groups }: MemoryLeaseSnapshot): { leases: Map<string, LeaseRow>; fireLogs: Map<string, Map<string, string>>; groups: Map<string, Map<string, number>> } {
  return {
    leases: new Map([...leases].map(([lease, row]) => [lease, { holder: row.holder === null ? null : { ...row.holder }, counter: row.counter }])),
    fireLogs: new Map([...fireLogs].map(([lease, log]) => [lease, new Map(log)])),
    groups: new Map([...groups].map(([group, members]) => [group, new Map(members)])),
  };
}

/** Makes `target` hold exactly `source`'s entries (the server's maps are its fields: replaced in place). */
function replaceEntries<V>(target: Map<string, V>, source: ReadonlyMap<string, V>): void {
  target.clear();
  for (const [key, value] of source) target.set(key, value);
}

/** Creates the shared state of an in-memory lease store (see `memoryLeases`). */
export function createMemoryLeaseServer(options?: MemoryLeaseServerOptions): MemoryLeaseServer {
  return new MemoryLeaseServer(options);
}
