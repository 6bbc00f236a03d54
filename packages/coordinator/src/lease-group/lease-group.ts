import type { MeterProvider } from '@opentelemetry/api';
import { EventEmitter } from 'node:events';
import { ConfigError, type Fence, type FencedLogger, type LeaseLossReason, type Token } from '@fenced/shared';
import { emit, parseOptions } from '@fenced/shared/internal';
import { Coordinator } from '../lease/coordinator.js';
import { commandTimeoutMs, defaultNodeId } from '../lease/coordinator-options.js';
import type { GroupMembership, LeaseBackend, ReleaseHub } from '../store/lease-backend.js';
import { givenStore } from '../lease/given-store.js';
import type { RedisClient } from '../redis-client.js';
import { assignLeases } from './assignment.js';
import { leaseGroupOptionsSchema, type LeaseGroupOptionsInput } from './lease-group-options.js';

export interface LeaseGroupEventMap {
  elected: [{ lease: string; token: Token }];
  /** `endedAt` as on the coordinator's `lost` event. */
  lost: [{ lease: string; token: Token; reason: LeaseLossReason; endedAt: number }];
  /** The live members changed; `members` is the new list, sorted. */
  members: [{ members: readonly string[] }];
  error: [Error];
}

export type CreateLeaseGroupOptions = Omit<LeaseGroupOptionsInput, 'redis' | 'store' | 'fences' | 'logger' | 'meterProvider'> & {
  /** The OpenTelemetry meter provider of every lease's instruments. @defaultValue the global one */
  meterProvider?: MeterProvider;
  /** An ioredis `Redis` (a Sentinel one with `failoverDetector: true`) or `Cluster`, ioredis 5 or 6. Give this or `store`. */
  redis?: RedisClient;
  /** The store of every lease and of the member list: `redisLeases(redis)`. Give this or `redis`. */
  store?: LeaseBackend;
  /** The fences of each lease, advanced at each of its elections. */
  fences?: (lease: string) => readonly Fence[];
  logger?: FencedLogger;
};

/** A member that has not been seen for this many heartbeats in a row is not handed leases yet. */
const STABLE_HEARTBEATS = 2;
/**
 * Handovers go out this many at a time, the next batch once the last one's releases are answered and
 * `HANDOVER_PAUSE_MS` more have passed. Released all at once, a join's thousands of leases reach the
 * newcomer in one burst, and the last of them waits for every election before it (measured at 10,000
 * leases: handovers p99 516 ms). Paced, each lease is leaderless for about one round trip, and the
 * whole rebalance still takes well under a renew interval.
 */
const HANDOVER_BATCH = 20;
const HANDOVER_PAUSE_MS = 50;
/**
 * `start()` begins the leases' elections this many at a time: 10,000 acquires in flight at once grow
 * the heap by their promises, replies and timers together, and V8 keeps the memory it grew to.
 */
const START_BATCH = 500;

/**
 * Many leases per process, shared out among the processes of a group.
 *
 * Each lease keeps the single-lease election unchanged (one acquire script that mints the token,
 * fences advanced at each election, renew, local deadline): the group runs one `Coordinator` per
 * lease, but over one command client and one subscriber connection for all of them.
 *
 * Balance: members send a heartbeat every renew interval to the store's member list, judged by the
 * store server's clock; a member is live until its last heartbeat + TTL. Every member computes the same assignment
 * from the live list (`assignLeases`: rendezvous hashing, ⌊N/P⌋ or ⌈N/P⌉ each), competes only for
 * its own leases, and hands a lease it leads but no longer owns to its owner (`handOver`: its term
 * ends, then the lease is released and the owner woken), only once that owner has sent
 * `STABLE_HEARTBEATS` heartbeats (a member that is flapping in and out gets nothing). A lease that
 * stays free because its owner does not take it is taken by anyone after `ttlMs`.
 * A dead member's heartbeats stop; within TTL it leaves the list. The others beat again the moment it
 * is due to expire (the heartbeat tells them when), so they reassign its leases as it leaves, and take
 * each one as its key expires: a takeover after a crash takes about a TTL, not TTL + renew.
 * Handovers are paced (`HANDOVER_BATCH`), so a newcomer is never handed thousands of leases at once.
 */
export class LeaseGroup extends EventEmitter<LeaseGroupEventMap> {
  readonly group: string;
  readonly nodeId: string;
  readonly leases: readonly string[];
  readonly ttlMs: number;
  readonly renewIntervalMs: number;

  /** The store every lease and the member list live in. */
  readonly store: LeaseBackend;
  readonly #logger: FencedLogger | undefined;
  readonly #membership: GroupMembership;
  readonly #coordinators = new Map<string, Coordinator>();
  readonly #nudges = new Map<string, () => void>();
  #hub: ReleaseHub | undefined;
  #members: readonly string[] = [];
  /** How many heartbeats in a row each member has been seen in. */
  readonly #seen = new Map<string, number>();
  #assignment = new Map<string, string>();
  #timer: NodeJS.Timeout | undefined;
  #running = false;
  /** Counts starts: a start that finds another began since (a stop and a start) leaves the rest to it. */
  #runs = 0;
  /** The heartbeat in flight, if one is: `stop()` leaves the list only after it (see there). */
  #beating: Promise<void> | undefined;
  /** The stop under way or last made: a start waits for it. */
  #stopping: Promise<void> | undefined;
  /** A release was heard: the next heartbeat goes at once (after the one in flight, if there is one). */
  #beatAgain = false;
  /** When the first other member expires unless it beats again (see `MemberList`). */
  #nextExpiryMs = -1;
  /** The paced handover loop is running (see `#handOverPaced`). */
  #handingOver = false;

  constructor(input: CreateLeaseGroupOptions) {
    super();
    const options = parseOptions('lease group', leaseGroupOptionsSchema, input);
    this.on('error', () => {});
    // A state machine names no store: createLeaseGroup (create.ts) turns `{ redis }` into one.
    this.store = givenStore('lease group', input.store);
    this.#logger = input.logger;
    this.group = options.group;
    this.nodeId = options.nodeId ?? defaultNodeId();
    this.leases = options.leases ?? Array.from({ length: options.shards! }, (_, i) => `${options.group}-${i}`);
    this.ttlMs = options.ttlMs;
    this.renewIntervalMs = options.renewIntervalMs;
    this.#membership = this.store.membership(options.group);

    const seat = (lease: string) => ({
      listen: async (onRelease: () => void) => {
        this.#nudges.set(lease, onRelease);
        const unsubscribe = await this.#hub!.listen(lease, () => {
          onRelease();
          // Released, and not ours by the list as last seen: its owner may have left (a member that
          // stops leaves the list first, then releases). Look at the list again now, not at the next
          // heartbeat a renew interval away: if the lease is now ours, the new list's nudge takes it.
          if (this.#assignment.size > 0 && this.#assignment.get(lease) !== this.nodeId) this.#beatSoon();
        });
        return () => {
          this.#nudges.delete(lease);
          unsubscribe();
        };
      },
      wants: () => this.#assignment.size === 0 || this.#assignment.get(lease) === this.nodeId,
      idleRetryMs: this.ttlMs,
    });
    for (const lease of this.leases) {
      const coordinator = new Coordinator(
        {
          store: this.store,
          lease,
          ttlMs: options.ttlMs,
          renewIntervalMs: options.renewIntervalMs,
          ...(options.driftMs === undefined ? {} : { driftMs: options.driftMs }),
          nodeId: this.nodeId,
          fences: input.fences?.(lease) ?? [],
          ...(input.logger === undefined ? {} : { logger: input.logger }),
          ...(input.meterProvider === undefined ? {} : { meterProvider: input.meterProvider }),
        },
        seat(lease),
      );
      coordinator.on('elected', ({ token }) => this.emit('elected', { lease, token }));
      coordinator.on('lost', ({ token, reason, endedAt }) => this.emit('lost', { lease, token, reason, endedAt }));
      this.#coordinators.set(lease, coordinator);
    }
  }

  /**
   * The coordinator of one lease: `isLeader()`, `token()`, `withLeadership()`, and what the scheduler
   * takes (`createScheduler({ coordinator: group.lease('billing-3'), … })`).
   * @throws {ConfigError} for a lease that is not in the group.
   */
  lease(name: string): Coordinator {
    const coordinator = this.#coordinators.get(name);
    if (coordinator === undefined) throw new ConfigError('lease group', [{ path: 'lease', message: `no lease ${JSON.stringify(name)} in group ${JSON.stringify(this.group)}` }]);
    return coordinator;
  }

  /** The leases this process leads now. */
  led(): string[] {
    return this.leases.filter((lease) => this.#coordinators.get(lease)!.isLeader());
  }

  /** The live members as of the last heartbeat, sorted. */
  members(): readonly string[] {
    return this.#members;
  }

  /** The member each lease is assigned to, as of the last heartbeat. */
  owner(lease: string): string | undefined {
    return this.#assignment.get(lease);
  }

  /**
   * Joins: one heartbeat (so the assignment already counts this member), then every lease's
   * election. Resolves after each lease's first attempt.
   */
  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    const run = ++this.#runs;
    const current = () => this.#running && this.#runs === run;
    // A stop still under way ends first: it leaves the list and closes the hub this start replaces.
    await this.#stopping;
    const hub = await this.store.openReleaseHub(this.#commandTimeoutMs(), (error) => this.#storeFailed('subscribe', error));
    // stop() came while the hub was opening (and left the list): a heartbeat now would put this
    // member back on it, to be handed leases it never takes until it expires a TTL later.
    if (!current()) {
      hub.close();
      return;
    }
    this.#hub = hub;
    await this.#beatOnce();
    // A stop (and maybe a start after it) came during the heartbeat: the stop closed this start's
    // hub, and the elections are the newer start's to begin, if there is one. Started here, a lease
    // would subscribe to a hub that is gone, and fail; and the newer start would find it not stopped
    // and leave it so, a lease this member never competes for.
    if (!current()) return;
    // Heartbeats go on while the elections start: a start of many leases on a slow Redis must not
    // outlast the member's own place on the list.
    this.#schedule();
    const coordinators = [...this.#coordinators.values()];
    for (let i = 0; i < coordinators.length && current(); i += START_BATCH) {
      await Promise.all(coordinators.slice(i, i + START_BATCH).map((c) => c.start()));
    }
  }

  /**
   * Leaves: the member list first, then every lease it leads is released. The members that hear a
   * release of a lease they do not own look at the list again at once (`#beatSoon`), find this one
   * gone, and the new owners take their share then: not at their next heartbeat, up to a renew
   * interval later, as when the releases came first (the others' lists still named this member).
   */
  async stop(): Promise<void> {
    if (!this.#running) return this.#stopping;
    this.#running = false;
    clearTimeout(this.#timer);
    // After the stop before it, if that is still under way (a stop, a start, a stop): run side by
    // side, the older one could end last and close the hub a start between them opened.
    const before = this.#stopping;
    this.#stopping = (async () => {
      await before;
      await this.#leave();
    })();
    return this.#stopping;
  }

  async #leave(): Promise<void> {
    // A heartbeat sent before the stop may reach the store after a leave sent now (another pooled
    // connection, another gRPC stream), and put the member back on the list for a TTL.
    await this.#beating?.catch(() => undefined);
    await this.#membership.leave(this.nodeId, this.#commandTimeoutMs()).catch((error: unknown) => this.#storeFailed('leave', error));
    await Promise.all([...this.#coordinators.values()].map((c) => c.stop()));
    this.#hub?.close();
    this.#hub = undefined;
  }

  /**
   * The next heartbeat: a renew interval away, or sooner when another member is due to expire before
   * that (it stopped beating), so its leases are reassigned as it leaves the list rather than up to
   * a renew interval later (takeover after a crash: about TTL, not TTL + renew).
   */
  #schedule(): void {
    if (!this.#running) return;
    // One timer at a time, whichever heartbeat (a timer's, or one a release asked for) scheduled last.
    clearTimeout(this.#timer);
    const again = this.#beatAgain;
    this.#beatAgain = false;
    const delay = again ? 0 : this.#nextExpiryMs >= 0 ? Math.min(this.renewIntervalMs, this.#nextExpiryMs + 5) : this.renewIntervalMs;
    this.#timer = setTimeout(() => void this.#beatOnce().finally(() => this.#schedule()), delay);
  }

  /**
   * A heartbeat now, rather than at the next one's time (a release of a lease this member does not
   * own was heard): one at a time, so a burst of releases costs one heartbeat in flight and one after.
   */
  #beatSoon(): void {
    if (!this.#running) return;
    this.#beatAgain = true;
    // With a heartbeat in flight, its answer schedules the next (at once, by the flag).
    if (this.#beating === undefined) this.#schedule();
  }

  /** One heartbeat, noted as in flight until it is answered (it never rejects: #beat reports its errors). */
  #beatOnce(): Promise<void> {
    const beating = this.#beat();
    this.#beating = beating;
    return beating.finally(() => {
      if (this.#beating === beating) this.#beating = undefined;
    });
  }

  /** One heartbeat: refresh the member list, reassign if it changed, and act on the assignment. */
  async #beat(): Promise<void> {
    let members: readonly string[];
    try {
      const list = await this.#membership.beat(this.nodeId, this.ttlMs, this.#commandTimeoutMs());
      this.#nextExpiryMs = list.nextExpiryMs;
      members = list.members;
    } catch (error) {
      this.#nextExpiryMs = -1;
      this.#storeFailed('heartbeat', error);
      return;
    }
    for (const member of [...this.#seen.keys()]) if (!members.includes(member)) this.#seen.delete(member);
    for (const member of members) this.#seen.set(member, (this.#seen.get(member) ?? 0) + 1);
    const changed = members.length !== this.#members.length || members.some((m, i) => m !== this.#members[i]);
    if (changed) {
      this.#members = members;
      this.#assignment = assignLeases(this.leases, members);
      this.emit('members', { members });
    }
    if (!this.#running) return;
    for (const [lease, coordinator] of this.#coordinators) {
      if (this.#assignment.get(lease) === this.nodeId && changed && !coordinator.isLeader()) this.#nudges.get(lease)?.();
    }
    if (!this.#handingOver) void this.#handOverPaced();
  }

  /** The leases this member leads but should hand to their owner now (seen steadily enough). */
  #toHandOver(): Coordinator[] {
    const due: Coordinator[] = [];
    for (const [lease, coordinator] of this.#coordinators) {
      const owner = this.#assignment.get(lease);
      if (owner !== undefined && owner !== this.nodeId && coordinator.isLeader() && (this.#seen.get(owner) ?? 0) >= STABLE_HEARTBEATS) due.push(coordinator);
    }
    return due;
  }

  /**
   * Hands the leases it should no longer lead to their owners, `HANDOVER_BATCH` at a time. What is due
   * is recomputed before each batch: the member list may have changed meanwhile.
   */
  async #handOverPaced(): Promise<void> {
    this.#handingOver = true;
    try {
      for (let due = this.#toHandOver(); due.length > 0 && this.#running; due = this.#toHandOver()) {
        await Promise.all(due.slice(0, HANDOVER_BATCH).map((c) => c.handOver()));
        if (due.length > HANDOVER_BATCH) await new Promise((resolve) => setTimeout(resolve, HANDOVER_PAUSE_MS));
      }
    } finally {
      this.#handingOver = false;
    }
  }

  #storeFailed(operation: string, error: unknown): void {
    emit(this.#logger, { type: 'lease-store.error', store: this.store.kind, lease: this.group, nodeId: this.nodeId, operation, error });
    this.emit('error', error instanceof Error ? error : new Error(String(error)));
  }

  #commandTimeoutMs(): number {
    return commandTimeoutMs(this.ttlMs);
  }
}
