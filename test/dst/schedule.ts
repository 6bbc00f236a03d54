/**
 * One schedule of the deterministic simulation: the real coordinator, scheduler, guard and handler
 * wrapper, as the READMEs compose them, three nodes in one process on the in-memory lease and fence
 * stores, every timer and clock virtual (`@sinonjs/fake-timers`) and every random choice drawn from
 * one seed (the store's reply delays, the faults and their times, the SDK's own jitter). One seed
 * replays one run exactly: the same timers, the same replies in the same order.
 *
 * Faults (each schedule draws two to six): a lossy failover of the lease store (back to a snapshot
 * taken at any earlier moment of the run: the grants since and the counter lost), a restart of the
 * lease store without persistence (its counter back to 0, the fences at 40 and more), such a restart
 * followed by the promotion of a replica that still had the data from just before it (the store
 * empty, then back to a state the nodes had moved past), a node's store replies delayed past its lease (a
 * slow or partitioned network), a node held at one of the SDK's failpoints for up to three TTLs (a
 * grantee before its election's advance, a leader between its pre-check and its write, a renew whose
 * reply is held, a fire applied and not yet recorded), a node crashed (its connections gone, nothing
 * released but what the fence store frees of its ended sessions) and restarted, the fence store
 * ending write sessions mid-write (each write fails and nothing of it commits: the scheduler's retry
 * must deliver the fire), and another session holding
 * the fence's row lock for up to two TTLs (writes and the election's advance wait behind it); and,
 * from a stream of its own, in half the schedules one or two stretches of a machine's clock running
 * slow (0.5 to 0.95 of the real rate for one to three TTLs: its node counts its lease as longer than
 * the store does); and, from a third stream, in a quarter of the schedules one or two whole-process
 * pauses (a node's every timer, reply, release notice and lock grant held for half a TTL to three
 * TTLs while the others run, as SIGSTOP or a long GC pause holds a real process: process-pauses.ts,
 * which also says what of a paused node still runs); and, from a fourth stream, in half the schedules
 * one or two graceful handovers: the leader stopped as the README stops a replica on SIGTERM (its
 * scheduler, then its coordinator, which releases the lease) at the moment its standbys' next
 * acquires are in flight, their replies held up to half a TTL (the interleaving in which a release
 * heard during an attempt that saw the lease held was once lost), and started again later. Left out
 * (not modelled here): a clock that runs fast or jumps (a monotonic clock does neither, and a fast
 * one only shortens a lease), and skew of the wall clock (due times come from the store's clock);
 * `pnpm sim` runs those against real processes.
 *
 * Invariants, checked after the faults and a heal: no stale write commits (committed tokens per
 * resource never go down), each fire takes effect at most once, no due fire is lost (every fire due
 * after the first election and before the end of the heal took effect), beliefs never overlap
 * (outside a lossy failover, where two holders are the store's fault, a leader whose clock ran
 * slow: the fence's to absorb, and a leader paused at the election, which must drop its belief on
 * the first turn after it runs again), a leader leads at the end, and a graceful handover is quick:
 * once the leader has released, a standby is granted the lease within `HANDOVER_BOUND_MS` of the
 * moment the first ready standby is free (its attempt in flight answered), not a retry interval later.
 */
import { createGuard } from '@fenced/consumer-guard';
import { createMemoryFenceDatabase, memoryFences } from '@fenced/consumer-guard/memory';
import { createCoordinator, createScheduler, fireId, type Coordinator, type Scheduler } from '@fenced/coordinator';
import { createMemoryLeaseServer, memoryLeases, type MemoryLeases, type MemoryLeaseSnapshot } from '@fenced/coordinator/memory';
import { parseToken, StaleTokenError, type FencedEvent } from '@fenced/shared';
import { failpoints, type FailpointName } from '@fenced/shared/failpoints';
import { ProcessPauses } from './process-pauses.js';
import { effectsOf, historyOf, sharedInvariantFailures, type Exit, type LedgerRow, type NodeEvent, type WriteRecord } from './sim-checks.js';
import { recordStoreHistory, storeLostEarlierTerm, termAt, termKey, type StoreHistory, type StoreTerm } from './store-history.js';
import { drawsFrom, enterVirtualWorld, T0, withOverrides } from './virtual-world.js';

export { T0 };

export const TTL_MS = 1_000;
const RENEW_MS = 250;
export const EVERY_MS = 250;
const NODES = 3;
/** The token the deployment's history reached before the run: the counter and the fence start there. */
const HISTORY_TOKEN = parseToken(40n);

export interface ScheduleOptions {
  readonly seed: number;
  /** Virtual time with faults, ms. */
  readonly faultMs?: number;
  /** Virtual time after the faults, ms: every due fire must have taken effect by its end. */
  readonly healMs?: number;
  /** Only these of the drawn faults (by number, from 0), the others left out: how a failure is shrunk. */
  readonly faults?: readonly number[];
}

export interface ScheduleResult {
  readonly seed: number;
  /** Each invariant broken, one line each. Empty: the schedule passed. */
  readonly failures: readonly string[];
  /** Each overlap of beliefs the faults excused (a store that lost a term, a clock that ran slow), and why. */
  readonly excused: readonly string[];
  /** The faults run, in order, each with its number among those drawn: the schedule in words. */
  readonly faults: readonly string[];
  /** How many faults the seed drew (the numbers `faults` may keep run from 0 to this, exclusive). */
  readonly drawn: number;
  readonly fires: number;
  readonly elections: number;
  /** Writes of a deposed term that an election's takeover ended (a writer frozen in its transaction). */
  readonly takeovers: number;
  /** Graceful handovers judged by the handover bound (others had no leader to stop, or a fault in the way: `excused` says which). */
  readonly handovers: number;
  /** Every event the nodes logged, with its virtual time: what `pnpm dst --seed` prints. */
  readonly events: ReadonlyArray<{ readonly at: number; readonly event: FencedEvent }>;
}

interface Node {
  readonly name: string;
  readonly store: MemoryLeases;
  readonly coordinator: Coordinator;
  readonly scheduler: Scheduler;
}

interface Fault {
  readonly at: number;
  readonly describe: string;
  readonly run: () => void | Promise<void>;
}

/** Runs one schedule to its end and judges it. */
export async function runSchedule(options: ScheduleOptions): Promise<ScheduleResult> {
  const faultMs = options.faultMs ?? 8_000;
  const healMs = options.healMs ?? 6_000;
  const world = enterVirtualWorld(options.seed);
  const { between, clock } = world;
  // Whole-process pauses, from a stream of their own (as the clock faults below): drawn before the
  // nodes start, since only a schedule that draws one runs its nodes in contexts of their own.
  const pauseRandom = drawsFrom(options.seed ^ PAUSE_STREAM);
  const pauseBetween = (low: number, high: number) => Math.floor(low + pauseRandom() * (high - low));
  const drawnPauses = pauseRandom() < 0.75 ? [] : Array.from({ length: pauseBetween(1, 3) }, () => ({ at: T0 + pauseBetween(500, faultMs - 500), slot: pauseBetween(0, NODES), ms: pauseBetween(TTL_MS / 2, TTL_MS * 3) }));
  const pauses = drawnPauses.length > 0 ? new ProcessPauses() : undefined;
  pauses?.install();
  const asNode = <T>(slot: number, fn: () => T): T => (pauses === undefined ? fn() : pauses.runAs(slot, fn));
  const nodes = new Map<number, Node>();
  try {
    const server = createMemoryLeaseServer();
    const database = createMemoryFenceDatabase();
    const events: NodeEvent[] = [];
    const logger = (event: FencedEvent) => events.push({ at: Date.now(), event });
    // What each node's handler came to, and the incarnations that crashed: the history `pnpm sim`'s
    // checkers read (sim-checks.ts).
    const writes: WriteRecord[] = [];
    const exits: Exit[] = [];
    // Each node's reply delays: a few ms, or a spike past the lease while a fault holds them.
    const spikes = new Map<number, { until: number; ms: number }>();
    const spikeSpans: SlotSpan[] = [];
    // The next acquire of a node whose reply a graceful handover holds, and whom to tell it was sent.
    const holds = new Map<number, { readonly ms: number; readonly sent: (slot: number, ms: number) => void }>();
    const handovers: HandoverRecord[] = [];
    // The fence store ends sessions mid-write (the database failing over, an operator's kill): armed
    // for the next sessions, each is ended as the write puts its row in, and nothing of it commits.
    let sessionsToEnd = 0;
    const begin = database.begin.bind(database);
    database.begin = () => {
      const tx = begin();
      if (sessionsToEnd === 0) return tx;
      sessionsToEnd--;
      const insert = tx.insert;
      return {
        ...tx,
        insert: (table, row) => {
          database.kill(tx.session);
          insert(table, row);
        },
      };
    };
    let incarnations = 0;

    // Each machine's monotonic clock (the coordinator's `clock`), kept across a node's restarts: a
    // fault slows it, the harmful direction for a lease (the node counts its lease as longer than
    // the store does). The stretches it ran slow, for the judge.
    const clocks = Array.from({ length: NODES }, () => new SkewableClock());
    const slowClocks: SlowClock[] = [];

    // What a paused node's stores send it waits for its resume: the lease server's release notices
    // (set off by another node's release) and the fence store's lock grants (by another's commit).
    const serverOf = (slot: number): typeof server =>
      pauses === undefined ? server : withOverrides(server, { listen: (lease: string, onRelease: () => void) => server.listen(lease, () => pauses.deliver(slot, onRelease)) });
    // Each node's sessions on the fence store, which a crash ends (its connections close, and the
    // database ends their sessions: a lock one held is freed, a wait one was in fails).
    const sessionsOf = new Map<number, Set<string>>();
    let takeovers = 0;
    const databaseOf = (slot: number): typeof database => {
      const sessions = new Set<string>();
      sessionsOf.set(slot, sessions);
      return withOverrides(database, {
        lock: (...args: Parameters<typeof database.lock>) => {
          sessions.add(args[1].session);
          const locked = database.lock(...args);
          return pauses === undefined ? locked : locked.then(async (release) => (await pauses.gate(slot), release));
        },
        // A node ends another's session only in an election's takeover: counted, to show it ran.
        kill: (session: string) => {
          const ended = database.kill(session);
          if (ended) takeovers++;
          return ended;
        },
      });
    };
    // Stretches in which a node's process was paused, for the judge: each from its pause to its
    // resume, or to the crash that ended it.
    const pausedSpans: PausedSpan[] = [];
    const pausedSince = new Map<number, number>();
    const pauseEnded = (slot: number, node: Node) => pausedSpans.push({ node: node.name, from: pausedSince.get(slot)!, to: Date.now() });

    const startNode = (slot: number): Promise<void> => asNode(slot, () => startIncarnation(slot));
    const startIncarnation = async (slot: number): Promise<void> => {
      const name = `n${slot}.${++incarnations}`;
      const guard = createGuard({ store: memoryFences({ database: databaseOf(slot) }), resource: 'ledger' });
      const handle = guard.wrapHandler(async (_payload, ctx) =>
        ctx.guardedWrite(async (trx) => trx.insert('ledger', { fire: ctx.fireId, token: ctx.token, node: name, scheduledAt: ctx.scheduledAt.getTime(), committedAt: Date.now() })),
      );
      // Reports what each call came to, as the real-process replicas do on stdout; the handler the
      // scheduler is given is still the wrapped one, its result and its throw passed on untouched.
      const reported = async (envelope: unknown) => {
        const fire = envelope as { fireId: string; token: bigint | string };
        const write = (outcome: WriteRecord['outcome']) => writes.push({ at: Date.now(), node: name, fireId: fire.fireId, token: BigInt(fire.token), outcome });
        write('begin');
        try {
          const outcome = await handle(envelope);
          write(outcome.status === 'applied' ? 'committed' : outcome.status);
          return outcome;
        } catch (err) {
          write(err instanceof StaleTokenError ? 'stale' : 'failed');
          throw err;
        }
      };
      const store = memoryLeases({
        server: serverOf(slot),
        replyDelayMs: (operation) => {
          const spike = spikes.get(slot);
          const ms = spike !== undefined && Date.now() < spike.until ? spike.ms : between(0, 6);
          const hold = operation === 'acquire' ? holds.get(slot) : undefined;
          if (hold === undefined) return ms;
          holds.delete(slot);
          const held = Math.max(ms, hold.ms);
          hold.sent(slot, held);
          return held;
        },
      });
      const coordinator = createCoordinator({ store, lease: 'billing', nodeId: name, ttlMs: TTL_MS, renewIntervalMs: RENEW_MS, fences: [guard], logger, clock: clocks[slot]! });
      const scheduler = createScheduler({ coordinator, jobs: { ledger: { everyMs: EVERY_MS, handler: reported } }, logger });
      scheduler.start();
      nodes.set(slot, { name, store, coordinator, scheduler });
      void coordinator.start();
    };

    const first = createGuard({ store: memoryFences({ database }), resource: 'ledger' });
    await first.migrate();
    // A deployment that has run for a while: 40 terms before this one, its counter and fence there.
    const pristine = server.snapshot();
    const history = recordStoreHistory(server, pristine);
    server.raiseCounter('billing', HISTORY_TOKEN);
    await first.advance(HISTORY_TOKEN);
    for (let slot = 0; slot < NODES; slot++) await startNode(slot);

    // The faults, drawn from the seed. Each drawn fault (a group of steps: a failover and the copy
    // it goes back to) is numbered; `options.faults` keeps only some of them (the shrinker's), every
    // one still drawn so the others stay as they were.
    const faults: Array<Fault & { readonly group: number }> = [];
    const drawn = between(2, 7);
    for (let group = 0; group < drawn; group++) {
      const add = (fault: Fault) => void (options.faults === undefined || options.faults.includes(group) ? faults.push({ ...fault, group }) : undefined);
      const at = T0 + between(500, faultMs - 500);
      const slot = between(0, NODES);
      switch (between(0, 8)) {
        case 6: {
          const count = between(1, 5);
          add({ at, describe: `the fence store ends the next ${count} write sessions mid-write`, run: () => void (sessionsToEnd = count) });
          break;
        }
        case 7: {
          // Another session (an operator's transaction, a migration) holds the fence's row lock:
          // writes and the election's advance queue behind it, in arrival order.
          const ms = between(TTL_MS / 2, TTL_MS * 2);
          add({
            at,
            describe: `another session holds the fence's row lock for ${ms} ms`,
            // Not awaited: the lock may be held now, and virtual time stands still while a fault runs.
            run: () => void database.lock('ledger', { session: `operator-${at}`, token: null }, 0).then((release) => setTimeout(release, ms)),
          });
          break;
        }
        case 5: {
          // The primary restarts without persistence, and a moment later the replica, which still
          // had its data (a copy from just before the restart), is promoted: the store goes empty,
          // then back to a state the nodes had moved past (Redis's documented hazard of a primary
          // without persistence that restarts before its replicas are failed over to).
          const lagMs = between(0, TTL_MS / 2);
          const emptyForMs = between(0, TTL_MS);
          let copy: MemoryLeaseSnapshot | undefined;
          add({ at: Math.max(T0, at - lagMs), describe: 'replica copy taken', run: () => void (copy = server.snapshot()) });
          add({ at, describe: `the lease store restarted empty, its replica (${lagMs} ms behind) promoted ${emptyForMs} ms later`, run: () => server.failOver(pristine) });
          add({
            at: at + emptyForMs,
            describe: 'the replica promoted',
            run: () => {
              if (copy !== undefined) server.failOver(copy);
            },
          });
          break;
        }
        case 4:
          // A restart without persistence: the store comes back empty, its counter at 0 below fences at 40 and more.
          add({
            at,
            describe: 'the lease store restarted empty (no persistence)',
            run: () => server.failOver(pristine),
          });
          break;
        case 0: {
          // The replica's copy from any earlier moment of the run: the elections since are what it loses.
          // Each failover goes back to its own copy.
          const lagMs = between(0, at - T0);
          let copy: MemoryLeaseSnapshot | undefined;
          add({ at: Math.max(T0, at - lagMs), describe: `replica copy taken`, run: () => void (copy = server.snapshot()) });
          add({
            at,
            describe: `lossy failover (the replica ${lagMs} ms behind)`,
            run: () => {
              if (copy !== undefined) server.failOver(copy);
            },
          });
          break;
        }
        case 1: {
          const ms = between(TTL_MS / 2, TTL_MS * 2);
          const forMs = between(TTL_MS, TTL_MS * 3);
          add({
            at,
            describe: `n${slot}'s replies delayed ${ms} ms for ${forMs} ms`,
            run: () => {
              spikes.set(slot, { until: Date.now() + forMs, ms });
              spikeSpans.push({ slot, from: Date.now(), to: Date.now() + forMs + ms });
            },
          });
          break;
        }
        case 2: {
          // The next node to reach one of these moments waits there, the others running on: a
          // grantee before its election's advance, a leader between its pre-check and its write, a
          // renew whose reply is held. The SDK's own failpoints, armed with a delay.
          const moment = STOPS[between(0, STOPS.length)]!;
          const ms = between(TTL_MS / 2, TTL_MS * 3);
          add({ at, describe: `the next node at ${moment} waits ${ms} ms there`, run: () => failpoints.arm(moment, { kind: 'delay', ms }) });
          break;
        }
        default: {
          const downMs = between(0, TTL_MS * 2);
          add({
            at,
            describe: `n${slot} crashed, back after ${downMs} ms`,
            run: async () => {
              const node = nodes.get(slot);
              if (node === undefined) return;
              nodes.delete(slot);
              exits.push({ at: Date.now(), node: node.name });
              // A paused process killed: what it held dies with it.
              if (pauses?.isPaused(slot) === true) {
                pauses.forget(slot);
                pauseEnded(slot, node);
              }
              // Its connections gone first: stopping then releases nothing (a crash gives nothing back).
              node.store.close();
              for (const session of sessionsOf.get(slot) ?? []) database.kill(session);
              void node.scheduler.stop();
              void node.coordinator.stop();
              setTimeout(() => void startNode(slot), downMs);
            },
          });
        }
      }
    }
    // Clock faults, from a stream of their own, numbered after the others: a schedule that draws
    // none is the one the seed ran before they existed, and a shrunk schedule's numbers still hold.
    const clockRandom = drawsFrom(options.seed ^ CLOCK_STREAM);
    const clockBetween = (low: number, high: number) => Math.floor(low + clockRandom() * (high - low));
    const clockFaults = clockRandom() < 0.5 ? 0 : clockBetween(1, 3);
    for (let group = drawn; group < drawn + clockFaults; group++) {
      const at = T0 + clockBetween(500, faultMs - 500);
      const slot = clockBetween(0, NODES);
      const rate = clockBetween(50, 96) / 100;
      const forMs = clockBetween(TTL_MS, TTL_MS * 3);
      // Drawn whether kept or not, so that the faults kept stay as they were.
      if (options.faults !== undefined && !options.faults.includes(group)) continue;
      faults.push({
        at,
        group,
        describe: `n${slot}'s clock runs at ${rate} of the real rate for ${forMs} ms`,
        run: () => {
          clocks[slot]!.setRate(rate);
          slowClocks.push({ slot, from: Date.now(), to: Date.now() + forMs });
          setTimeout(() => clocks[slot]!.setRate(1), forMs);
        },
      });
    }
    // Pauses, numbered after the clock faults.
    const resume = (slot: number) => {
      const node = nodes.get(slot);
      if (pauses === undefined || !pauses.isPaused(slot) || node === undefined) return;
      pauseEnded(slot, node);
      pauses.resume(slot);
    };
    for (const [i, { at, slot, ms }] of drawnPauses.entries()) {
      const group = drawn + clockFaults + i;
      if (options.faults !== undefined && !options.faults.includes(group)) continue;
      faults.push({
        at,
        group,
        describe: `n${slot}'s process paused for ${ms} ms`,
        run: () => {
          if (pauses === undefined || pauses.isPaused(slot) || !nodes.has(slot)) return;
          pauses.pause(slot);
          pausedSince.set(slot, Date.now());
          setTimeout(() => resume(slot), ms);
        },
      });
    }
    // Graceful handovers, from a stream of their own, numbered after the pauses.
    const handoverRandom = drawsFrom(options.seed ^ HANDOVER_STREAM);
    const handoverBetween = (low: number, high: number) => Math.floor(low + handoverRandom() * (high - low));
    const handoverCount = handoverRandom() < 0.5 ? 0 : handoverBetween(1, 3);
    for (let i = 0; i < handoverCount; i++) {
      const group = drawn + clockFaults + drawnPauses.length + i;
      const at = T0 + handoverBetween(500, faultMs - 500);
      const holdMs = Array.from({ length: NODES }, () => handoverBetween(1, TTL_MS / 2));
      const downMs = handoverBetween(0, TTL_MS * 2);
      if (options.faults !== undefined && !options.faults.includes(group)) continue;
      faults.push({
        at,
        group,
        describe: `the leader stopped gracefully once its standbys' next acquires are sent (replies held ${holdMs.join('/')} ms by slot), back after ${downMs} ms`,
        run: () => {
          const leading = [...nodes].find(([slot, node]) => node.coordinator.isLeader() && pauses?.isPaused(slot) !== true);
          if (leading === undefined) return void handovers.push({ at: Date.now(), leader: null });
          const [leaderSlot, leader] = leading;
          const record: HandoverRecord = { at: Date.now(), leader: leader.name, term: termKey(leader.name, leader.coordinator.token()!), stoppedAt: undefined, held: [] };
          handovers.push(record);
          // Out of the running at once: no other fault picks it while it stops.
          nodes.delete(leaderSlot);
          const stop = () => {
            if (record.stoppedAt !== undefined) return;
            record.stoppedAt = Date.now();
            for (const slot of holds.keys()) holds.delete(slot);
            // As the README stops a replica on SIGTERM: the scheduler, then the coordinator.
            void asNode(leaderSlot, async () => {
              await leader.scheduler.stop();
              await leader.coordinator.stop();
              leader.store.close();
              setTimeout(() => void startNode(leaderSlot), downMs);
            });
          };
          const standbys = [...nodes.keys()];
          let waiting = standbys.length;
          // Standbys retry at least every renew interval: past two TTLs, stop without the rest.
          const giveUp = setTimeout(stop, 2 * TTL_MS);
          for (const slot of standbys) {
            holds.set(slot, {
              ms: holdMs[slot]!,
              sent: (from, ms) => {
                record.held.push({ node: nodes.get(from)?.name ?? `n${from}`, slot: from, sentAt: Date.now(), repliesAt: Date.now() + ms });
                if (--waiting > 0) return;
                clearTimeout(giveUp);
                stop();
              },
            });
          }
          if (waiting === 0) stop();
        },
      });
    }
    faults.sort((a, b) => a.at - b.at);
    for (const fault of faults) {
      await clock.tickAsync(Math.max(0, fault.at - Date.now()));
      await fault.run();
    }
    await clock.tickAsync(Math.max(0, T0 + faultMs - Date.now()));
    spikes.clear();
    failpoints.disarm();
    for (const slot of nodes.keys()) resume(slot);
    await clock.tickAsync(healMs);

    const excused: string[] = [];
    const handoverVerdict = judgeHandovers(handovers, history, { paused: pausedSpans, spikes: spikeSpans, exits });
    excused.push(...handoverVerdict.notJudged);
    const failures = judge(database.rows('ledger') as unknown as readonly LedgerRow[], events, history, T0 + faultMs + healMs, [...nodes.values()].some((node) => node.coordinator.isLeader()), slowClocks, excused, writes, exits, pausedSpans);
    failures.push(...handoverVerdict.failures);
    return {
      seed: options.seed,
      failures,
      excused,
      faults: faults.map((f) => `${f.at - T0} ms: [${f.group}] ${f.describe}`),
      drawn: drawn + clockFaults + drawnPauses.length + handoverCount,
      fires: database.rows('ledger').length,
      elections: events.filter((e) => e.event.type === 'lease.acquired').length,
      takeovers,
      handovers: handoverVerdict.judged,
      events,
    };
  } finally {
    for (const node of nodes.values()) {
      node.store.close();
      void node.scheduler.stop();
      void node.coordinator.stop();
    }
    failpoints.disarm();
    await clock.runAllAsync().catch(() => undefined);
    pauses?.uninstall();
    world.leave();
  }
}

/** Seeds the clock faults' stream apart from the others (any odd constant would do). */
const CLOCK_STREAM = 0x2545f491;
/** The first turn of the event loop after a timer, in virtual time: fake-timers runs it a millisecond on. */
const NEXT_TURN_MS = 1;
/** Seeds the pauses' stream apart from the others. */
const PAUSE_STREAM = 0x9e3779b1;
/** Seeds the graceful handovers' stream apart from the others. */
const HANDOVER_STREAM = 0x85ebca6b;
/**
 * How soon after a graceful release a ready standby is granted the lease, counted from the moment
 * the first of them is free (the release heard, its attempt in flight answered): a wake-up, one
 * request, a reply of at most a few ms. A wake-up that is lost waits out a retry interval (250 ms).
 */
export const HANDOVER_BOUND_MS = 50;

/** A graceful handover the schedule ran: the leader it stopped (null: none led), and its standbys' held acquires. */
export type HandoverRecord =
  | { readonly at: number; readonly leader: null }
  | {
      readonly at: number;
      readonly leader: string;
      /** The stopped leader's term, `node@token`: its release is found in the store's history by it. */
      readonly term: string;
      stoppedAt: number | undefined;
      readonly held: Array<{ readonly node: string; readonly slot: number; readonly sentAt: number; readonly repliesAt: number }>;
    };

/** What else happened in a schedule that can hold a standby back: the judge of a handover leaves those out. */
export interface Disturbances {
  readonly paused: readonly PausedSpan[];
  /** Stretches in which a node's replies were delayed (its slot, from the fault to the last delayed reply). */
  readonly spikes: readonly SlotSpan[];
  readonly exits: readonly Exit[];
}

/**
 * Judges each graceful handover: once the stopped leader's release reached the store, the lease is
 * granted again within HANDOVER_BOUND_MS of the moment the first ready standby is free (its held
 * acquire answered, or the release itself if that came later). A standby is ready unless paused,
 * crashed or its replies were delayed by a fault meanwhile; a handover with no ready standby, or
 * with a failover of the lease store in its window, or whose leader released nothing (its lease
 * was already gone), is not judged, and says why.
 */
export function judgeHandovers(handovers: readonly HandoverRecord[], history: StoreHistory, disturbances: Disturbances): { failures: string[]; notJudged: string[]; judged: number } {
  const failures: string[] = [];
  const notJudged: string[] = [];
  let judged = 0;
  const grants = [...history.grants.values()].flat().map((term) => term.grantedAt);
  const overlaps = (from: number, to: number, span: { from: number; to: number }) => span.from <= to && span.to >= from;
  for (const handover of handovers) {
    const at = `handover at +${handover.at - T0} ms`;
    if (handover.leader === null) {
      notJudged.push(`${at} not judged: no node led`);
      continue;
    }
    const stoppedAt = handover.stoppedAt;
    const release = stoppedAt === undefined ? undefined : history.releases.find((r) => r.key === handover.term && r.at >= stoppedAt);
    if (release === undefined) {
      notJudged.push(`${at} not judged: ${handover.leader} released nothing (its lease was gone)`);
      continue;
    }
    const freeAt = (held: (typeof handover.held)[number]) => Math.max(release.at, held.repliesAt);
    const ready = handover.held.filter((held) => {
      const to = freeAt(held) + HANDOVER_BOUND_MS;
      return (
        !disturbances.paused.some((p) => p.node === held.node && overlaps(held.sentAt, to, p)) &&
        !disturbances.spikes.some((s) => s.slot === held.slot && overlaps(held.sentAt, to, s)) &&
        !disturbances.exits.some((e) => e.node === held.node && e.at >= held.sentAt && e.at <= to)
      );
    });
    if (ready.length === 0) {
      notJudged.push(`${at} not judged: no standby was ready (paused, crashed or its replies delayed)`);
      continue;
    }
    const deadline = Math.min(...ready.map(freeAt)) + HANDOVER_BOUND_MS;
    if (history.failovers.some((f) => f.at >= release.at && f.at <= deadline)) {
      notJudged.push(`${at} not judged: the lease store failed over within it`);
      continue;
    }
    judged++;
    if (grants.some((g) => g >= release.at && g <= deadline)) continue;
    const next = grants.filter((g) => g >= release.at).sort((a, b) => a - b)[0];
    failures.push(
      `handover: ${handover.leader} released at +${release.at - T0} ms and ${ready.map((h) => h.node).join(' and ')} ${ready.length > 1 ? 'were' : 'was'} ready from +${deadline - HANDOVER_BOUND_MS - T0} ms, yet nobody was granted the lease by +${deadline - T0} ms (${next === undefined ? 'nor later' : `next grant at +${next - T0} ms`})`,
    );
  }
  return { failures, notJudged, judged };
}

/** A stretch in which a node's whole process was paused (virtual epoch ms). */
export interface PausedSpan {
  readonly node: string;
  readonly from: number;
  readonly to: number;
}

/** A stretch of virtual time (epoch ms) on one machine, by its slot. */
export interface SlotSpan {
  readonly slot: number;
  readonly from: number;
  readonly to: number;
}

/** A stretch in which a machine's clock ran slow. */
export type SlowClock = SlotSpan;

/**
 * A machine's monotonic clock whose rate a fault can change: it reads the virtual monotonic time,
 * scaled by the rate since the last change, and never jumps. Only the coordinator reads it (its
 * lease deadlines and its estimate of the store's clock); timers keep the real rate, as they would
 * not on a machine whose clock is slow, which leaves the deadline check, the part that keeps a lease
 * safe, as the part under test.
 */
class SkewableClock {
  #since = performance.now();
  #reading = this.#since;
  #rate = 1;

  now(): number {
    return this.#reading + (performance.now() - this.#since) * this.#rate;
  }

  setRate(rate: number): void {
    this.#reading = this.now();
    this.#since = performance.now();
    this.#rate = rate;
  }
}

/** Where a node can be held (failpoints), each the moment a pause does harm at. */
const STOPS: readonly FailpointName[] = ['lease.acquired-before-dispatch', 'handler.prechecked-before-write', 'lease.renew-sent-before-reply', 'scheduler.dispatched-before-record'];

/** The invariants, over the ledger (in commit order) and the nodes' events. */
export function judge(
  ledger: readonly LedgerRow[],
  events: ReadonlyArray<{ at: number; event: FencedEvent }>,
  history: StoreHistory,
  end: number,
  leaderAtEnd: boolean,
  slowClocks: readonly SlowClock[] = [],
  /** Receives each overlap of beliefs excused, and why. */
  excusedOut: string[] = [],
  writes: readonly WriteRecord[] = [],
  exits: readonly Exit[] = [],
  pausedSpans: readonly PausedSpan[] = [],
): string[] {
  // The promise over what took effect, the lease's and the model's, judged by `pnpm sim`'s own
  // checkers: no stale write commits, each fire at most once, every fire due after the first
  // election up to three TTLs before the end (the heal's time to catch up) takes effect, nothing
  // early, elections in token order, dispatches only by a leader, every write step one the model allows.
  const firstElection = events.find((e) => e.event.type === 'lease.acquired')?.at;
  const expectedFireIds: string[] = [];
  for (let at = firstElection === undefined ? Number.POSITIVE_INFINITY : Math.ceil((firstElection + 1) / EVERY_MS) * EVERY_MS; at <= end - 3 * TTL_MS; at += EVERY_MS) expectedFireIds.push(fireId('ledger', at));
  const failures = sharedInvariantFailures({ history: historyOf(events, writes, exits), effects: effectsOf(ledger), expectedFireIds, window: { start: T0, end } });
  if (firstElection === undefined) failures.push('no leader was ever elected');
  // Beliefs never overlap, unless the store caused it (a failover between the two grants lost a
  // write of the earlier term, see storeLostEarlierTerm) or the earlier leader's clock ran slow
  // during its term, past what the drift margin allows for (the fence's to absorb, judged above).
  // Otherwise two leaders at once is the SDK's.
  const leading = new Map<string, { since: number; term: StoreTerm | undefined }>();
  for (const { at, event } of events) {
    if (event.type === 'lease.acquired') {
      const term = termAt(history, termKey(event.nodeId, event.token), at);
      for (const [other, belief] of leading) {
        if (other === event.nodeId) continue;
        // Its term began at the grant (the memory store grants as the request arrives, which is when
        // the node starts counting), not when the reply reached it: a clock slow in between counts.
        const termFrom = Math.min(belief.since, belief.term?.grantedAt ?? belief.since);
        const clockRanSlow = slowClocks.some((c) => other.startsWith(`n${c.slot}.`) && c.from <= at && c.to >= termFrom);
        const storeLost = term !== undefined && belief.term !== undefined && (belief.term.writes[0]! < term.writes[0]! ? storeLostEarlierTerm(history, belief.term, term) : storeLostEarlierTerm(history, term, belief.term));
        // A leader paused at the election believes on only because its process cannot run to see its
        // deadline pass: it must drop the belief on the first turn of its event loop after it runs
        // again (its deadline's timer, held, fires then; fake-timers puts a turn taken inside a timer
        // a millisecond on).
        const pause = pausedSpans.find((p) => p.node === other && p.from <= at && p.to >= at);
        if (pause !== undefined && !storeLost && !clockRanSlow) {
          const dropped = events.find((e) => e.event.type === 'lease.lost' && e.event.nodeId === other && e.at >= belief.since);
          if (dropped === undefined || dropped.at > pause.to + NEXT_TURN_MS) failures.push(`${other}, paused from +${pause.from - T0} to +${pause.to - T0} ms, still believed it led after it ran again (${dropped === undefined ? 'never dropped' : `dropped at +${dropped.at - T0} ms`})`);
        }
        const excused = clockRanSlow || storeLost || pause !== undefined;
        if (excused) excusedOut.push(`${event.nodeId} elected at +${at - T0} ms while ${other} led: ${storeLost ? 'the store lost the earlier term' : clockRanSlow ? `${other}'s clock ran slow` : `${other} was paused`}`);
        if (!excused) failures.push(`${event.nodeId} elected at +${at - T0} ms while ${other} led (since +${belief.since - T0} ms)`);
      }
      leading.set(event.nodeId, { since: at, term });
    } else if (event.type === 'lease.lost') leading.delete(event.nodeId);
  }
  // A leader at the end, once the faults are healed.
  if (!leaderAtEnd) failures.push('no node leads at the end, after the faults healed');
  return failures;
}
