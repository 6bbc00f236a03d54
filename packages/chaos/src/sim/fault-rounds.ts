import { leadershipOverlaps } from '../checker/check-run.js';
import type { FaultContext, SimNode } from './fault-context.js';
import { HARNESS_FAILED, type HistoryEvent } from '../history.js';
import { draw, preconditionMissed, type HoldAt, type ReplicaFaultKind, type DeploymentFaultKind, type Span, type Victim } from './faults/fault-kind.js';
import { FAULT_KINDS, type RedisFault, type ReplicaFault, type ServiceFaultOf, type StoresFault } from './faults/registry.js';

export type { Span } from './faults/fault-kind.js';
export { isWrite } from './faults/fault-kind.js';
export type { RedisFault, ReplicaFault, StoresFault } from './faults/registry.js';
export type { PrimaryFailoverVariant } from './faults/primary-failover.js';
export type { PostgresDownVariant } from './faults/postgres-down.js';

/**
 * Faults as data (Jepsen's nemesis, TigerBeetle's simulator): a scenario is one round, repeated, that
 * says what to prepare, what to hit, with which fault, for how long, and how to heal;
 * `runFaultRounds` is the one interpreter. What each fault does is its own module (faults/), found
 * by its kind in the registry. Randomness comes from the run's seeded source, drawn in a fixed
 * order, so a seed replays a schedule.
 */

/**
 * A replica picked by weight: the leader stopped at a failpoint (the exact moment that hurts most),
 * the leader wherever it is, or a standby.
 */
export interface ReplicaTarget {
  readonly kind: 'replica';
  readonly weights: { readonly atFailpoint: number; readonly leader: number; readonly standby: number };
  /** The failpoint the leader is stopped at (the app's name for it, see `SimApp`). */
  readonly failpoint: string;
}

/** Whichever replica leads when the gap ends. */
export interface LeaderTarget {
  readonly kind: 'leader';
}

/** What a round does before its gap. */
export type Setup =
  /**
   * Hands leadership to the replica that carries the run's clock fault (the first). With
   * `freshStart`, a replica that does not lead is restarted first, so its faulty clock starts on time
   * and falls behind from there (as on a host that just booted).
   */
  {
    readonly kind: 'lead-clock-faulted';
    readonly freshStart: boolean;
    /**
     * What the scenario needs of it: the clock-faulted replica still believing it leads once another
     * replica does (a slow clock stretches its lease). A run in which that never happened says so in
     * the history (`precondition missed`): its control cannot show damage, which proves nothing.
     */
    readonly needsOverlap?: boolean;
  };

interface RoundTiming {
  readonly setup?: Setup;
  /** Quiet time before the hit. */
  readonly gap: Span;
  /** Quiet time after healing. */
  readonly settle: Span;
  /** Rounds start only while more than this many TTLs of the fault time remain. */
  readonly whileTtlsLeft: number;
  /**
   * The first round (one per variant, for a fault with variants) runs whatever the fault time: the
   * scenario is that round.
   */
  readonly atLeastOnce?: boolean;
  /**
   * After the gap, the hit happens only while more than this many TTLs of the fault time remain;
   * otherwise the round ends there (what the setup brought about lasts to the end of the run).
   * @defaultValue the hit always happens
   */
  readonly hitWhileTtlsLeft?: number;
  /**
   * After the settle, the next round waits (up to five TTLs) until a replica dispatches a fire at most
   * half a TTL late: the backlog this round's outage left is cleared first. A long outage (etcd's own
   * elections) with a handler that takes most of the job's interval catches up slowly, and rounds
   * back to back would measure the app's throughput, not the fault. The wait is bounded because on a
   * loaded machine such a backlog may not drain at all (each fire takes about its interval): the
   * checker judges a fire that was still waiting, within its bound, when the next hit began from
   * that hit's end (layer-invariants.ts), so a round that comes mid-drain is judged fairly.
   * @defaultValue the settle alone
   */
  readonly untilCaughtUp?: boolean;
}

/** Who a round hits and how; the pairs that make sense are the only ones that type-check. */
export type Hit = ReplicaHit | RedisHit | StoresHit | ServiceHit | NoHit;
interface ReplicaHit { readonly target: ReplicaTarget | LeaderTarget; readonly fault: ReplicaFault; readonly hold: Span }
interface RedisHit { readonly target: { readonly kind: 'redis' }; readonly fault: RedisFault; readonly hold: Span }
/** Every replica's connections to the stores at once. */
interface StoresHit { readonly target: { readonly kind: 'stores' }; readonly fault: StoresFault; readonly hold: Span }
/** The service the app's job writes through (see `SimApp.faultService`). */
interface ServiceHit { readonly target: { readonly kind: 'service' }; readonly fault: ServiceFaultOf; readonly hold: Span }
/** No fault of its own: the run's clock fault does the harm once the setup handed it leadership. */
interface NoHit { readonly target: { readonly kind: 'none' }; readonly fault?: never; readonly hold?: never }

export type FaultRound = RoundTiming & Hit;

/**
 * Runs `round` again and again until the fault time runs out, then stays quiet until the deadline
 * (so the checked window is the run's whole fault time). Never throws: a round that does (the
 * toolkit failed, not the SDK) ends the rounds with a `HARNESS_FAILED` fault in the history, and the
 * run goes on to be healed and checked, its verdict failed.
 */
export async function runFaultRounds(ctx: FaultContext, round: FaultRound): Promise<void> {
  try {
    await faultRounds(ctx, round);
  } catch (error) {
    ctx.fault(HARNESS_FAILED, 'start', undefined, error instanceof Error ? error.message : String(error));
    ctx.fault(HARNESS_FAILED, 'end');
  }
}

async function faultRounds(ctx: FaultContext, round: FaultRound): Promise<void> {
  const mustRun = round.atLeastOnce !== true ? 0 : round.fault !== undefined && 'variants' in round.fault ? round.fault.variants.length : 1;
  // Until one fault has landed at the target's failpoint, every round aims there: a run that never
  // did would not test what its scenario claims (and fails as toothless).
  const aim = { landed: false };
  for (let n = 0; n < mustRun || ctx.remainingMs > ctx.ttlMs * round.whileTtlsLeft; n++) {
    // A primary deposed by the previous round may still wait for its demotion (Sentinel takes 8 s or
    // more): the deployment must be whole before it is hit again. That wait is not the round's time.
    if (hitsRedis(round) && ctx.redis?.kind === 'replicated') await ctx.redis.waitUntilWhole(60_000);
    if (n < mustRun) ctx.ensureRemaining(ctx.ttlMs * round.whileTtlsLeft);
    else if (ctx.remainingMs <= ctx.ttlMs * round.whileTtlsLeft) break;
    if (round.setup !== undefined && !(await prepare(ctx, round.setup))) continue;
    await ctx.sleep(draw(ctx, round.gap));
    if (round.hitWhileTtlsLeft !== undefined && ctx.remainingMs <= ctx.ttlMs * round.hitWhileTtlsLeft) continue;
    if (!(await hit(ctx, round, n, aim))) continue;
    await ctx.sleep(draw(ctx, round.settle));
    if (round.untilCaughtUp === true) await ctx.waitUntilCaughtUp(ctx.ttlMs / 2, ctx.ttlMs * 5);
  }
  await ctx.sleep(ctx.remainingMs);
  if (round.setup?.kind === 'lead-clock-faulted' && round.setup.needsOverlap === true) {
    const faulty = ctx.nodes[0]!.name;
    if (!believedBesideAnother(ctx.history.events, faulty)) preconditionMissed(ctx, `${faulty}, its clock faulted, never believed it led while another replica did`);
  }
}

/**
 * Whether `node` believed it led for a stretch in which another replica did too, as the supervisor
 * read their lines (the checker's overlap windows: an exited replica believes nothing).
 */
export function believedBesideAnother(events: readonly HistoryEvent[], node: string): boolean {
  return leadershipOverlaps(events, { start: -Infinity, end: Infinity }).some((o) => o.nodes.includes(node));
}

/** Carries out the setup; false when it did not take (the round is skipped). */
async function prepare(ctx: FaultContext, setup: Setup): Promise<boolean> {
  const faulty = ctx.nodes[0]!;
  if (setup.freshStart && ctx.leader() !== faulty) {
    ctx.fault('restart', 'start', faulty.name, 'restarted with its faulty clock');
    await ctx.kill(faulty);
    ctx.restart(faulty);
    ctx.fault('restart', 'end', faulty.name);
    await ctx.sleep(ctx.ttlMs);
  }
  await makeLeader(ctx, faulty);
  return ctx.leader() === faulty;
}

/**
 * Hands leadership to `wanted`: the other standbys are paused (they cannot compete), a leader other
 * than `wanted` is killed, and once `wanted` leads everyone comes back (the killed one restarted).
 */
async function makeLeader(ctx: FaultContext, wanted: SimNode): Promise<void> {
  const leader = await ctx.waitForLeader(ctx.ttlMs * 4);
  if (leader === wanted) return;
  ctx.fault('handover', 'start', wanted.name, `others held back until ${wanted.name} leads`);
  const held = ctx.nodes.filter((n) => n !== wanted && n !== leader && n.process.running && !n.process.paused);
  for (const n of held) ctx.pause(n);
  if (leader !== undefined) await ctx.kill(leader);
  const until = Date.now() + ctx.ttlMs * 8;
  while (ctx.leader() !== wanted && Date.now() < until && ctx.remainingMs > 0) await ctx.sleep(20);
  for (const n of held) ctx.resume(n);
  if (leader !== undefined) ctx.restart(leader);
  ctx.fault('handover', 'end', wanted.name);
}

/** Injects the round's fault and heals it; false when there was nothing to hit right now. */
async function hit(ctx: FaultContext, round: Hit, n: number, aim: { landed: boolean }): Promise<boolean> {
  if (hitsNothing(round)) return true;
  if (hitsRedis(round) || hitsStores(round) || hitsService(round)) {
    const kind = FAULT_KINDS[round.fault.kind] as DeploymentFaultKind<'redis' | 'stores' | 'service', RedisFault | StoresFault | ServiceFaultOf>;
    await kind.inject(ctx, round.fault, { holdMs: draw(ctx, round.hold), round: n });
    return true;
  }
  const kind = FAULT_KINDS[round.fault.kind] as ReplicaFaultKind<ReplicaFault>;
  const heldAt: HoldAt = kind.holdAt?.(ctx, round.fault, round.hold) ?? { kind: 'stop' };
  const victim = round.target.kind === 'leader' ? await pickLeader(ctx) : await pickReplica(ctx, round.target, !aim.landed, heldAt);
  if (victim === undefined) return false;
  if (victim.atFailpoint) aim.landed = true;
  return kind.inject(ctx, round.fault, { hold: round.hold, victim, heldAt });
}

// TypeScript does not narrow a union by a nested discriminant (`round.target.kind`); these do.
const hitsNothing = (round: Hit): round is NoHit => round.target.kind === 'none';
const hitsRedis = (round: Hit): round is RedisHit => round.target.kind === 'redis';
const hitsStores = (round: Hit): round is StoresHit => round.target.kind === 'stores';
const hitsService = (round: Hit): round is ServiceHit => round.target.kind === 'service';

async function pickLeader(ctx: FaultContext): Promise<Victim | undefined> {
  const leader = await ctx.waitForLeader(5000);
  return leader === undefined ? undefined : { node: leader, label: 'leader' };
}

/** Picks the victim by the target's weights; undefined when there is none right now. */
async function pickReplica(ctx: FaultContext, target: ReplicaTarget, mustAim: boolean, holdAt: HoldAt): Promise<Victim | undefined> {
  const { atFailpoint, leader: leaderWeight, standby } = target.weights;
  const kinds = [...Array<'failpoint'>(atFailpoint).fill('failpoint'), ...Array<'leader'>(leaderWeight).fill('leader'), ...Array<'standby'>(standby).fill('standby')];
  const drawn = ctx.random.pick(kinds);
  const kind = mustAim ? 'failpoint' : drawn;
  const leader = await ctx.waitForLeader(5000);
  if (kind === 'standby') {
    const standbys = ctx.standbys();
    return standbys.length === 0 ? undefined : { node: ctx.random.pick(standbys), label: 'standby' };
  }
  if (leader === undefined) return undefined;
  if (kind === 'leader') return { node: leader, label: 'leader' };
  // Held by its own failpoint (stopped, or stalled), it waits there for the fault.
  const held = holdAt.kind === 'stall' ? await ctx.stallAt(leader, target.failpoint, holdAt.ms, 5000) : await ctx.stopAt(leader, target.failpoint, 5000);
  return held ? { node: leader, label: `leader at ${target.failpoint}`, atFailpoint: true } : undefined;
}
