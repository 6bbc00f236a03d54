/**
 * One schedule of the deterministic simulation of the lease group: the real `LeaseGroup` (a
 * coordinator per lease, the member list, the assignment, the paced handovers, the leave), three
 * members in one process on the in-memory lease store, every timer and clock virtual and every
 * random choice drawn from one seed, as in schedule.ts. Each request takes 0-5 ms to reach the store
 * and each reply 0-5 ms to come back, drawn per request: requests one member sends in one order can
 * be applied in another (as over several pooled connections), which is how a heartbeat sent before a
 * leave can land after it.
 *
 * Faults (each schedule draws two to five): a member stopped as the README stops a replica on
 * SIGTERM and started again later (a new process); a member crashed (its connections gone, nothing
 * released or left) and started again later; a member stopped and started twice, 0-59 ms apart, the
 * same object, its requests taking up to 40 ms each meanwhile, so that its stops and starts overlap
 * and end in any order (a restart a supervisor retries under load); a member cut off from the store for a while (its requests fail, none reaching it) and
 * restarted within it; and a member's replies delayed past the lease for a while (a slow network). Left out:
 * lease-store failovers, pauses and slow clocks (schedule.ts runs those on one lease; the group adds
 * nothing to them but its member list, which a failover can only make stale for a heartbeat), and
 * handovers of more than `HANDOVER_BATCH` leases at once (the pacing is a load promise, measured by
 * `pnpm bench:scale`).
 *
 * Invariants, each the group's own promise:
 * - `start()` resolves (the README awaits it: a rejection ends the process), unless the member crashed.
 * - No two members believe they lead one lease at once (a crashed member's beliefs end at the crash).
 * - A member whose `stop()` resolved is off the member list: no heartbeat of it is applied until it
 *   starts again (else the others hand it leases it never takes, leaderless for a TTL).
 * - A stopped member keeps no release hub or subscription open (a subscriber connection, in Redis; a
 *   hub takes 0-15 ms to open here, as a connection does).
 * - A graceful stop hands over quickly: each lease the stopping member released is granted again
 *   within `GROUP_HANDOVER_BOUND_MS` of the release, when another member was running undisturbed.
 * - A crash is taken over in about a TTL: each lease the crashed member led is granted again within
 *   `GROUP_TTL_MS + CRASH_TAKEOVER_SLACK_MS` of the crash, when another member was running undisturbed.
 * - At the end, once the faults heal: every member lists exactly the running members and hears each
 *   lease's releases, and each lease is led by exactly one member, its owner by that list.
 */
import { createLeaseGroup, parseLeaseValue, type LeaseGroup } from '@fenced/coordinator';
import { createMemoryLeaseServer, memoryLeases, type MemoryLeases } from '@fenced/coordinator/memory';
import { LeaseStoreUnavailableError, type FencedEvent } from '@fenced/shared';
import type { ScheduleOptions, ScheduleResult } from './schedule.js';
import { enterVirtualWorld, T0, withOverrides } from './virtual-world.js';

export const GROUP_TTL_MS = 1_000;
const RENEW_MS = 250;
const NODES = 3;
const LEASES = Array.from({ length: 6 }, (_, i) => `shard-${i}`);
/**
 * How soon after a graceful stop's release of a lease another member is granted it: the release
 * heard, a heartbeat (after the one in flight, if any) that finds the stopper gone, the owner's
 * acquire: five requests of at most 10 ms each. A member that waits for its next heartbeat to look at
 * the list takes up to a renew interval (250 ms).
 */
export const GROUP_HANDOVER_BOUND_MS = 60;
/**
 * How much past a TTL from a crash its leases may stay leaderless: the crashed member's last requests
 * still in flight (10 ms), the heartbeat the others send as it is due to expire (5 ms after, and one
 * request), the owner's acquire. A member that notices the death only at its regular heartbeat
 * takes up to a renew interval more.
 */
export const CRASH_TAKEOVER_SLACK_MS = 80;

/** As the single lease's: a seed, the virtual times, and the faults kept (how a failure is shrunk). */
export type GroupScheduleOptions = ScheduleOptions;

/** What the single lease's schedule reports of itself (`excused`: each bound not judged, and why), and the bounds judged. */
export interface GroupScheduleResult extends Pick<ScheduleResult, 'seed' | 'failures' | 'excused' | 'faults' | 'drawn' | 'elections' | 'events'> {
  /** Graceful handovers and crash takeovers judged by their bounds. */
  readonly judged: { readonly handovers: number; readonly takeovers: number };
}

interface Member {
  readonly name: string;
  readonly store: MemoryLeases;
  readonly group: LeaseGroup;
  /** Release subscriptions this member's store has open on the server. */
  readonly listening: { count: number };
  /** Release hubs this member opened, and closed. */
  readonly hubs: { opened: number; closed: number };
}

/** What the store did, in order: grants and frees per lease, heartbeats per member. */
interface StoreLog {
  readonly grants: Array<{ readonly lease: string; readonly node: string; readonly at: number }>;
  readonly frees: Array<{ readonly lease: string; readonly node: string; readonly at: number }>;
  readonly beats: Array<{ readonly member: string; readonly at: number }>;
}

/** A stretch in which a member's stop resolved and it was not started again (to: its next start, or the end). */
interface Stopped {
  readonly name: string;
  readonly from: number;
  to: number;
}

/** A fault that can hold a member back or change the list, for the bounds' judge: its stretch. */
interface Disturbance {
  readonly from: number;
  readonly to: number;
  readonly what: string;
}

/** A graceful stop or a crash, judged by its bound. */
interface Departure {
  readonly kind: 'stop' | 'crash';
  readonly slot: number;
  readonly name: string;
  readonly at: number;
  /** The leases it led at that moment. */
  readonly led: readonly string[];
  /** Its own entry among the disturbances, which does not rule out its own bound. */
  readonly disturbance: Disturbance;
}

/** Runs one lease-group schedule to its end and judges it. */
export async function runGroupSchedule(options: GroupScheduleOptions): Promise<GroupScheduleResult> {
  const faultMs = options.faultMs ?? 8_000;
  const healMs = options.healMs ?? 5_000;
  const world = enterVirtualWorld(options.seed);
  const { between, clock } = world;
  const members = new Map<number, Member>();
  const everyMember: Member[] = [];
  try {
    const server = createMemoryLeaseServer();
    const events: Array<{ at: number; event: FencedEvent }> = [];
    const logger = (event: FencedEvent) => events.push({ at: Date.now(), event });
    const log: StoreLog = { grants: [], frees: [], beats: [] };
    const { grant, free, beat } = server;
    server.grant = (lease, ttlMs, valueOf) => {
      const granted = grant.call(server, lease, ttlMs, valueOf);
      if (granted !== null) log.grants.push({ lease, node: parseLeaseValue(granted.value)!.nodeId, at: Date.now() });
      return granted;
    };
    server.free = (lease, value) => {
      const freed = free.call(server, lease, value);
      if (freed) log.frees.push({ lease, node: parseLeaseValue(value)!.nodeId, at: Date.now() });
      return freed;
    };
    server.beat = (group, member, ttlMs) => {
      log.beats.push({ member, at: Date.now() });
      return beat.call(server, group, member, ttlMs);
    };

    const spikes = new Map<number, { until: number; ms: number }>();
    // Members cut off from the store (by slot, until when): their requests fail, and none reaches it.
    const cutOff = new Map<number, number>();
    const reachable = (slot: number) => (cutOff.get(slot) ?? 0) <= Date.now();
    const slowUntil = new Map<number, number>();
    const disturbances: Disturbance[] = [];
    const stopped: Stopped[] = [];
    const departures: Departure[] = [];
    const exits: Array<{ name: string; at: number }> = [];
    let incarnations = 0;
    // A start that rejects: the README awaits it in main, so a rejection there ends the process.
    const startRejections: Array<{ name: string; at: number; error: unknown }> = [];
    const start = (group: LeaseGroup, name: string): void => void group.start().catch((error: unknown) => startRejections.push({ name, at: Date.now(), error }));

    const startMember = (slot: number): void => {
      const name = `n${slot}.${++incarnations}`;
      // A member joining changes everyone's list and assignment for a couple of heartbeats.
      if (incarnations > NODES) disturbances.push({ from: Date.now(), to: Date.now() + 2 * RENEW_MS, what: `${name} joined` });
      const listening = { count: 0 };
      // Each request of a member cut off fails before it reaches the store, as unreachable.
      const unreachable = (operation: string) => new LeaseStoreUnavailableError('memory', 'unreachable', `${operation}: ${name} is cut off from the store`, { cause: undefined });
      const guarded = new Proxy(server, {
        get: (on, key) => {
          const value: unknown = Reflect.get(on, key);
          if (typeof value !== 'function') return value;
          // The clock is read inside requests already applied; an election's record is best-effort
          // (dropped, as a write that never arrives).
          if (key === 'now' || key === 'time') return value.bind(on);
          return (...args: unknown[]) => {
            if (!reachable(slot)) {
              if (key === 'recordElection') return undefined;
              throw unreachable(String(key));
            }
            return (value as (...a: unknown[]) => unknown).apply(on, args);
          };
        },
      });
      const store = memoryLeases({
        // Each subscription on the server counted, and its end: a stopped member's must be 0.
        server: withOverrides(guarded, {
          listen: (lease: string, onRelease: () => void) => {
            const unsubscribe = guarded.listen(lease, onRelease);
            listening.count++;
            let open = true;
            return () => {
              if (open) listening.count--;
              open = false;
              unsubscribe();
            };
          },
        }),
        // A member restarting under load: its requests take up to 40 ms each while the fault lasts,
        // so its stops and starts end in any order.
        requestDelayMs: () => between(0, (slowUntil.get(slot) ?? 0) > Date.now() ? 41 : 6),
        replyDelayMs: () => {
          const spike = spikes.get(slot);
          return spike !== undefined && Date.now() < spike.until ? spike.ms : between(0, 6);
        },
      });
      // A release hub takes 0-15 ms to open, as a subscriber connection does on Redis; each one the
      // member opens is counted, and each it closes: once stopped, it holds none.
      const hubs = { opened: 0, closed: 0 };
      const openReleaseHub = store.openReleaseHub.bind(store);
      store.openReleaseHub = async (...args) => {
        await new Promise((resolve) => setTimeout(resolve, between(0, 16)));
        const hub = await openReleaseHub(...args);
        hubs.opened++;
        let open = true;
        return {
          ...hub,
          close: () => {
            if (open) hubs.closed++;
            open = false;
            hub.close();
          },
        };
      };
      const group = createLeaseGroup({ store, group: 'shards', leases: LEASES, nodeId: name, ttlMs: GROUP_TTL_MS, renewIntervalMs: RENEW_MS, logger });
      const member = { name, store, group, listening, hubs };
      members.set(slot, member);
      everyMember.push(member);
      start(group, name);
    };
    for (let slot = 0; slot < NODES; slot++) startMember(slot);

    // Each member's stops and starts, numbered: a stop that resolves with a start called since is
    // not a stretch off the list (the start comes after it).
    const calls = new Map<string, number>();
    const call = (name: string) => {
      const n = (calls.get(name) ?? 0) + 1;
      calls.set(name, n);
      return n;
    };
    const stopMember = (group: LeaseGroup, name: string): Promise<void> => {
      const n = call(name);
      return group.stop().then(() => {
        if (calls.get(name) === n) stopped.push({ name, from: Date.now(), to: Number.POSITIVE_INFINITY });
      });
    };
    const restartMember = (group: LeaseGroup, name: string): void => {
      call(name);
      for (const s of stopped) if (s.name === name && s.to === Number.POSITIVE_INFINITY) s.to = Date.now();
      start(group, name);
    };

    const faults: Array<{ at: number; group: number; describe: string; run: () => void }> = [];
    const drawn = between(2, 6);
    for (let number = 0; number < drawn; number++) {
      const at = T0 + between(500, faultMs - 500);
      const slot = between(0, NODES);
      const downMs = between(0, GROUP_TTL_MS * 2);
      const kind = between(0, 5);
      const cutForMs = between(GROUP_TTL_MS / 2, GROUP_TTL_MS * 3);
      const quick = [between(0, 60), between(0, 60)] as const;
      const spikeMs = between(GROUP_TTL_MS / 2, GROUP_TTL_MS * 2);
      const spikeForMs = between(GROUP_TTL_MS, GROUP_TTL_MS * 3);
      if (options.faults !== undefined && !options.faults.includes(number)) continue;
      const add = (describe: string, run: () => void) => faults.push({ at, group: number, describe, run });
      if (kind === 0) {
        add(`n${slot} stopped gracefully, a new process started after ${downMs} ms`, () => {
          const member = members.get(slot);
          if (member === undefined) return;
          members.delete(slot);
          const disturbance = { from: Date.now(), to: Number.POSITIVE_INFINITY, what: `${member.name} stopped` };
          disturbances.push(disturbance);
          const departure: Departure = { kind: 'stop', slot, name: member.name, at: Date.now(), led: member.group.led(), disturbance };
          departures.push(departure);
          void stopMember(member.group, member.name).then(() => {
            disturbance.to = Date.now();
            setTimeout(() => startMember(slot), downMs);
          });
        });
      } else if (kind === 1) {
        add(`n${slot} crashed, a new process started after ${downMs} ms`, () => {
          const member = members.get(slot);
          if (member === undefined) return;
          members.delete(slot);
          // Until it leaves the others' lists (a TTL after its last heartbeat), they still assign it
          // leases it will never take.
          const disturbance = { from: Date.now(), to: Date.now() + GROUP_TTL_MS + CRASH_TAKEOVER_SLACK_MS, what: `${member.name} crashed` };
          disturbances.push(disturbance);
          departures.push({ kind: 'crash', slot, name: member.name, at: Date.now(), led: member.group.led(), disturbance });
          exits.push({ name: member.name, at: Date.now() });
          // Its connections gone first: stopping then sends nothing (a crash gives nothing back).
          member.store.close();
          void member.group.stop();
          setTimeout(() => startMember(slot), downMs);
        });
      } else if (kind === 2) {
        add(`n${slot} stopped and started again, twice, ${quick[0]} ms then ${quick[1]} ms apart (the same process, its requests slow)`, () => {
          const member = members.get(slot);
          if (member === undefined) return;
          disturbances.push({ from: Date.now(), to: Date.now() + quick[0] + quick[1] + 2 * GROUP_TTL_MS, what: `${member.name} restarted twice` });
          slowUntil.set(slot, Date.now() + quick[0] + quick[1] + GROUP_TTL_MS);
          const { group, name } = member;
          // Each step only while the member is still this fault's: another fault may have stopped or
          // crashed it meanwhile (a process is not started again after its graceful stop).
          const ours = () => members.get(slot) === member;
          void stopMember(group, name);
          restartMember(group, name);
          setTimeout(() => {
            if (!ours()) return;
            void stopMember(group, name);
            setTimeout(() => ours() && restartMember(group, name), quick[1]);
          }, quick[0]);
        });
      } else if (kind === 4) {
        // A partition between one member and the store (or the store refusing its connections): a
        // start, a restart or a subscription in it fails, and must not leave a lease uncontested.
        add(`n${slot} cut off from the store for ${cutForMs} ms, restarted (the same process) ${quick[0]} ms in`, () => {
          cutOff.set(slot, Date.now() + cutForMs);
          disturbances.push({ from: Date.now(), to: Date.now() + cutForMs + 2 * GROUP_TTL_MS, what: `n${slot} cut off` });
          setTimeout(() => {
            const member = members.get(slot);
            if (member === undefined) return;
            void stopMember(member.group, member.name);
            restartMember(member.group, member.name);
          }, quick[0]);
        });
      } else {
        add(`n${slot}'s replies delayed ${spikeMs} ms for ${spikeForMs} ms`, () => {
          spikes.set(slot, { until: Date.now() + spikeForMs, ms: spikeMs });
          disturbances.push({ from: Date.now(), to: Date.now() + spikeForMs + spikeMs, what: `n${slot}'s replies delayed` });
        });
      }
    }
    faults.sort((a, b) => a.at - b.at);
    for (const fault of faults) {
      await clock.tickAsync(Math.max(0, fault.at - Date.now()));
      fault.run();
    }
    await clock.tickAsync(Math.max(0, T0 + faultMs - Date.now()));
    spikes.clear();
    cutOff.clear();
    await clock.tickAsync(healMs);
    const end = Date.now();

    const excused: string[] = [];
    const failures: string[] = [];
    failures.push(...overlapFailures(events, exits));
    // A crashed process's start may fail on its closed connections: it is dead either way.
    for (const r of startRejections) {
      if (!exits.some((e) => e.name === r.name && e.at <= r.at)) failures.push(`${r.name}'s start() rejected at +${r.at - T0} ms: ${r.error instanceof Error ? r.error.message : String(r.error)}`);
    }
    // At the end: every member lists the running ones, and each lease has one leader, its owner.
    const running = [...members.values()];
    const names = running.map((m) => m.name).sort();
    for (const member of running) {
      const listed = member.group.members();
      if (listed.join() !== names.join()) failures.push(`at the end ${member.name} lists ${listed.join(', ') || 'nobody'}, not the running ${names.join(', ')}`);
    }
    // Each running member hears each lease's releases (one subscription each): a lease it does not
    // hear of waits out a retry interval when it is handed over to it.
    for (const member of running) if (member.listening.count !== LEASES.length) failures.push(`at the end ${member.name} has ${member.listening.count} release subscriptions open, not one per lease (${LEASES.length})`);
    for (const lease of LEASES) {
      const leaders = running.filter((m) => m.group.lease(lease).isLeader()).map((m) => m.name);
      const owner = running[0]?.group.owner(lease);
      if (leaders.length !== 1 || leaders[0] !== owner) failures.push(`at the end ${lease} is led by ${leaders.join(' and ') || 'nobody'}, its owner by the list being ${owner ?? 'nobody'}`);
    }
    // A stopped member stays off the list until it starts again.
    for (const s of stopped) {
      const late = log.beats.find((b) => b.member === s.name && b.at > s.from && b.at < s.to);
      if (late !== undefined) failures.push(`${s.name}'s heartbeat was applied at +${late.at - T0} ms, after its stop resolved at +${s.from - T0} ms: it was back on the list`);
    }
    const judged = judgeDepartures(departures, log, disturbances, excused, failures, end);
    // Now stop everyone: no member keeps a release subscription open once its stop resolved.
    // Virtual time stands still unless ticked: the stops' requests and replies are its timers.
    const stopping = Promise.all(running.map((m) => m.group.stop()));
    await clock.tickAsync(GROUP_TTL_MS);
    await stopping;
    for (const member of everyMember) {
      if (exits.some((e) => e.name === member.name)) continue;
      if (member.listening.count > 0) failures.push(`${member.name} still has ${member.listening.count} release subscriptions open after its stop`);
      if (member.hubs.closed !== member.hubs.opened) failures.push(`${member.name} opened ${member.hubs.opened} release hubs and closed ${member.hubs.closed} by the end of its stop`);
    }
    return {
      seed: options.seed,
      failures,
      excused,
      faults: faults.map((f) => `${f.at - T0} ms: [${f.group}] ${f.describe}`),
      drawn,
      elections: events.filter((e) => e.event.type === 'lease.acquired').length,
      judged,
      events,
    };
  } finally {
    for (const member of members.values()) {
      member.store.close();
      void member.group.stop();
    }
    await clock.runAllAsync().catch(() => undefined);
    world.leave();
  }
}

/** No two members believe they lead one lease at once; a crashed member's beliefs end at its crash. */
function overlapFailures(events: ReadonlyArray<{ at: number; event: FencedEvent }>, exits: ReadonlyArray<{ name: string; at: number }>): string[] {
  const failures: string[] = [];
  const leading = new Map<string, Map<string, number>>();
  const crashes = [...exits].sort((a, b) => a.at - b.at);
  const crashedAt = new Map(exits.map((e) => [e.name, e.at]));
  let nextCrash = 0;
  for (const { at, event } of events) {
    // A crash at or before this event ends the crashed member's beliefs first.
    for (; nextCrash < crashes.length && crashes[nextCrash]!.at <= at; nextCrash++) for (const believers of leading.values()) believers.delete(crashes[nextCrash]!.name);
    if (event.type !== 'lease.acquired' && event.type !== 'lease.lost' && event.type !== 'lease.released') continue;
    // A crashed process says nothing more: what its objects log after the crash (a reply already on
    // its way) is not a belief anyone holds.
    if ((crashedAt.get(event.nodeId) ?? Number.POSITIVE_INFINITY) <= at) continue;
    const believers = leading.get(event.lease) ?? new Map<string, number>();
    leading.set(event.lease, believers);
    if (event.type !== 'lease.acquired') {
      believers.delete(event.nodeId);
      continue;
    }
    for (const [other, since] of believers) if (other !== event.nodeId) failures.push(`${event.nodeId} elected to ${event.lease} at +${at - T0} ms while ${other} led it (since +${since - T0} ms)`);
    believers.set(event.nodeId, at);
  }
  return failures;
}

/**
 * Judges each graceful stop and crash by its bound: each lease the member led is granted again (to
 * anyone) within the bound, counted from its release (a stop) or from the crash plus a TTL. Not
 * judged, and said why, when no other member was running undisturbed through the bound (another
 * member stopped, crashed, restarting or its replies delayed) or the lease was not released (a
 * stop whose release failed).
 */
function judgeDepartures(departures: readonly Departure[], log: StoreLog, disturbances: readonly Disturbance[], excused: string[], failures: string[], end: number): { handovers: number; takeovers: number } {
  let handovers = 0;
  let takeovers = 0;
  for (const departure of departures) {
    const what = `${departure.kind === 'stop' ? 'graceful stop' : 'crash'} of ${departure.name} at +${departure.at - T0} ms`;
    for (const lease of departure.led) {
      const freed = departure.kind === 'stop' ? log.frees.find((f) => f.lease === lease && f.node === departure.name && f.at >= departure.at) : undefined;
      if (departure.kind === 'stop' && freed === undefined) {
        excused.push(`${what}: ${lease} not judged, its release did not reach the store`);
        continue;
      }
      const from = freed?.at ?? departure.at + GROUP_TTL_MS;
      const deadline = from + (departure.kind === 'stop' ? GROUP_HANDOVER_BOUND_MS : CRASH_TAKEOVER_SLACK_MS);
      if (deadline > end) continue;
      // Any other disturbance from the departure to the deadline rules the bound out (a member joining
      // or restarting changes the list again; a slow one answers late).
      const inTheWay = disturbances.find((d) => d !== departure.disturbance && d.from <= deadline && d.to >= departure.at);
      if (inTheWay !== undefined) {
        excused.push(`${what}: ${lease} not judged, ${inTheWay.what} meanwhile`);
        continue;
      }
      if (departure.kind === 'stop') handovers++;
      else takeovers++;
      const regranted = log.grants.find((g) => g.lease === lease && g.at >= departure.at && g.node !== departure.name);
      if (regranted !== undefined && regranted.at <= deadline) continue;
      const bound = departure.kind === 'stop' ? `${GROUP_HANDOVER_BOUND_MS} ms of its release at +${from - T0} ms` : `a TTL and ${CRASH_TAKEOVER_SLACK_MS} ms of the crash`;
      failures.push(`${what}: ${lease} not granted again within ${bound} (${regranted === undefined ? 'never' : `granted to ${regranted.node} at +${regranted.at - T0} ms`})`);
    }
  }
  return { handovers, takeovers };
}
