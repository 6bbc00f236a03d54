import type { ProxyMode } from '../fault-proxy.js';
import type { FaultContext, SimNode } from './fault-context.js';

/**
 * Faults as data (Jepsen's nemesis, TigerBeetle's simulator): a scenario is one round, repeated, that
 * says what to prepare, what to hit, with which fault, for how long, and how to heal;
 * `runFaultRounds` is the one interpreter. Randomness comes from the run's seeded source, drawn in a
 * fixed order, so a seed replays a schedule.
 */

/** A duration: milliseconds, or multiples of the lease TTL, drawn uniformly. */
export type Span =
  | { readonly ms: readonly [number, number] }
  /** Whole milliseconds in [min × TTL, max × TTL]. */
  | { readonly ttls: readonly [number, number] };

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

export type ReplicaFault =
  /** SIGSTOP, then SIGCONT after the hold. */
  | { readonly kind: 'pause' }
  /** SIGKILL, then a restart after the hold. */
  | { readonly kind: 'crash' }
  /** Redis cut or dropped (half-open) and PostgreSQL stalled; after the hold PostgreSQL delivers the held write, late; Redis heals `redisHealsAfter` later. */
  | { readonly kind: 'partition'; readonly redis: readonly ProxyMode[]; readonly redisHealsAfter: Span }
  /**
   * The event loop blocked for the hold (a busy loop inside the replica: CPU starvation, a long
   * garbage collection), not SIGSTOP: the process stays runnable and its sockets open, and nothing in
   * it runs. Aimed at the failpoint, it stalls there.
   */
  | { readonly kind: 'stall' }
  /**
   * The wall clock of the replica that carries the run's `stepped` clock fault jumps by each step in
   * turn (NTP stepping it, an operator setting it), held for the hold each, then set right; its
   * monotonic clock runs on undisturbed.
   */
  | { readonly kind: 'clock-step'; readonly stepsMs: readonly number[] }
  /**
   * A failover in the middle of a catch-up batch: the leader is paused for the hold, so fires pile up
   * for the next one; the replica elected next stops itself at `failpoint` (its batch begun, the rest
   * still to go) and stays stopped until a third replica leads and has caught up; then it wakes up,
   * its batch half done, and after it the first leader. Needs three replicas.
   */
  | { readonly kind: 'failover-mid-catch-up'; readonly failpoint: string }
  /**
   * Every PostgreSQL connection of the replica reset by its proxy (each backend ends and rolls its
   * transaction back, as under pg_terminate_backend, a failover or a network fault); aimed at the
   * failpoint inside the guarded transaction, the replica stands there while it happens and goes on
   * after the hold, into a connection that is gone.
   */
  | { readonly kind: 'connection-reset' };

export type RedisFault =
  /** The Redis server restarts without persistence after being down for the hold. */
  | { readonly kind: 'redis-restart' }
  /**
   * Replication is held back, the leader is killed twice so that two elections (new tokens) happen on
   * the primary only, then the replica is promoted and every client repointed: the counter goes back.
   * After the hold the deposed primary rejoins, empty, as the new replica.
   */
  | { readonly kind: 'lossy-failover' }
  /**
   * Redis Cluster or Sentinel: the primary that serves the lease is frozen (SIGSTOP) until the
   * deployment promotes one of its replicas, stays frozen for the hold, then resumes, still believing
   * it is the primary until it learns otherwise. Round n takes variant n (cycling):
   * - `freeze`: frozen while the leader stands at `failpoint` (its write committed, the fire not yet
   *   recorded);
   * - `lossy`: replication is held back first and the leader crashed twice, so that two elections
   *   (new tokens) and their writes happen on that primary only: the promoted replica has seen none.
   */
  | {
      readonly kind: 'primary-failover';
      readonly variants: readonly [PrimaryFailoverVariant, ...PrimaryFailoverVariant[]];
      /** Where the leader is when the freeze starts: the app's failpoint between a fire's write and its record. */
      readonly failpoint: string;
    };

export type PrimaryFailoverVariant = 'freeze' | 'lossy';

/**
 * PostgreSQL unreachable for every replica (their proxies cut: connections reset, new ones refused)
 * for the hold; round n takes variant n (cycling): with Redis up, or with Redis cut too.
 */
export type StoresFault =
  | {
      readonly kind: 'postgres-down';
      readonly variants: readonly [PostgresDownVariant, ...PostgresDownVariant[]];
    }
  /**
   * The run's own PostgreSQL server shut down (fast: every session ended, transactions in flight
   * rolled back) and started again after the hold, while the replicas write.
   */
  | { readonly kind: 'postgres-restart' };

export type PostgresDownVariant = 'redis up' | 'redis down';

/** What a round does before its gap. */
export type Setup =
  /**
   * Hands leadership to the replica that carries the run's clock fault (the first). With
   * `freshStart`, a replica that does not lead is restarted first, so its faulty clock starts on time
   * and falls behind from there (as on a host that just booted).
   */
  { readonly kind: 'lead-clock-faulted'; readonly freshStart: boolean };

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
}

/** Who a round hits and how; the pairs that make sense are the only ones that type-check. */
export type Hit = ReplicaHit | RedisHit | StoresHit | NoHit;
interface ReplicaHit { readonly target: ReplicaTarget | LeaderTarget; readonly fault: ReplicaFault; readonly hold: Span }
interface RedisHit { readonly target: { readonly kind: 'redis' }; readonly fault: RedisFault; readonly hold: Span }
/** Every replica's connections to the stores at once. */
interface StoresHit { readonly target: { readonly kind: 'stores' }; readonly fault: StoresFault; readonly hold: Span }
/** No fault of its own: the run's clock fault does the harm once the setup handed it leadership. */
interface NoHit { readonly target: { readonly kind: 'none' }; readonly fault?: never; readonly hold?: never }

export type FaultRound = RoundTiming & Hit;

function draw(ctx: FaultContext, span: Span): number {
  if ('ms' in span) return ctx.random.int(span.ms[0], span.ms[1]);
  return ctx.random.int(Math.round(ctx.ttlMs * span.ttls[0]), Math.round(ctx.ttlMs * span.ttls[1]));
}

/** Matches a replica's report of a write with `outcome` (by `node`, when given). */
export const isWrite = (outcome: string, node?: string) => (n: string, r: Record<string, unknown>) => r['kind'] === 'write' && r['outcome'] === outcome && (node === undefined || n === node);

const isElected = (_n: string, r: Record<string, unknown>) => r['kind'] === 'belief' && r['leader'] === true;

/**
 * Runs `round` again and again until the fault time runs out, then stays quiet until the deadline
 * (so the checked window is the run's whole fault time).
 */
export async function runFaultRounds(ctx: FaultContext, round: FaultRound): Promise<void> {
  const mustRun = round.atLeastOnce !== true ? 0 : round.fault !== undefined && 'variants' in round.fault ? round.fault.variants.length : 1;
  // Until one fault has landed at the target's failpoint, every round aims there: a run that never
  // did would not test what its scenario claims (and fails as toothless).
  const aim = { landed: false };
  for (let n = 0; n < mustRun || ctx.remainingMs > ctx.ttlMs * round.whileTtlsLeft; n++) {
    // A primary deposed by the previous round may still wait for its demotion (Sentinel takes 8 s or
    // more): the deployment must be whole before it is hit again. That wait is not the round's time.
    if (hitsRedis(round) && ctx.redis.kind === 'replicated') await ctx.redis.waitUntilWhole(60_000);
    if (n < mustRun) ctx.ensureRemaining(ctx.ttlMs * round.whileTtlsLeft);
    else if (ctx.remainingMs <= ctx.ttlMs * round.whileTtlsLeft) break;
    if (round.setup !== undefined && !(await prepare(ctx, round.setup))) continue;
    await ctx.sleep(draw(ctx, round.gap));
    if (round.hitWhileTtlsLeft !== undefined && ctx.remainingMs <= ctx.ttlMs * round.hitWhileTtlsLeft) continue;
    if (!(await hit(ctx, round, n, aim))) continue;
    await ctx.sleep(draw(ctx, round.settle));
  }
  await ctx.sleep(ctx.remainingMs);
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
  if (hitsRedis(round)) {
    await injectIntoRedis(ctx, round.fault, draw(ctx, round.hold), n);
    return true;
  }
  if (hitsStores(round)) {
    if (round.fault.kind === 'postgres-restart') await restartPostgres(ctx, draw(ctx, round.hold));
    else await cutStores(ctx, round.fault, draw(ctx, round.hold), n);
    return true;
  }
  // A stall is drawn before its victim: a leader stalled at its failpoint is held there from the hit on.
  const stallMs = round.fault.kind === 'stall' ? draw(ctx, round.hold) : undefined;
  const holdAt: HoldAt = stallMs === undefined ? { kind: 'stop' } : { kind: 'stall', ms: stallMs };
  const victim = round.target.kind === 'leader' ? await pickLeader(ctx) : await pickReplica(ctx, round.target, !aim.landed, holdAt);
  if (victim === undefined) return false;
  if (victim.atFailpoint) aim.landed = true;
  if (stallMs !== undefined) return stall(ctx, victim, stallMs);
  await injectIntoReplica(ctx, round.fault, round.hold, victim);
  return true;
}

/** How a leader aimed at its failpoint is held there: stopped (SIGSTOP), or its event loop stalled for `ms`. */
type HoldAt = { readonly kind: 'stop' } | { readonly kind: 'stall'; readonly ms: number };

// TypeScript does not narrow a union by a nested discriminant (`round.target.kind`); these do.
const hitsNothing = (round: Hit): round is NoHit => round.target.kind === 'none';
const hitsRedis = (round: Hit): round is RedisHit => round.target.kind === 'redis';
const hitsStores = (round: Hit): round is StoresHit => round.target.kind === 'stores';

/** Who a round hits, how the timeline labels it, and whether it stands at its failpoint. */
interface Victim {
  readonly node: SimNode;
  readonly label: string;
  readonly atFailpoint?: boolean;
}

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

/**
 * The stall fault: the victim's event loop blocked for `holdMs`. A victim at its failpoint is stalled
 * already; any other starts now. False when it did not say it started.
 */
async function stall(ctx: FaultContext, victim: Victim, holdMs: number): Promise<boolean> {
  const { node, label } = victim;
  if (!victim.atFailpoint && !(await ctx.stallNow(node, holdMs))) return false;
  ctx.fault('stall', 'start', node.name, `${label}: event loop blocked ${holdMs} ms`);
  await ctx.sleep(holdMs);
  ctx.fault('stall', 'end', node.name);
  return true;
}

/** The run's PostgreSQL server shut down for `holdMs`, then started again. */
async function restartPostgres(ctx: FaultContext, holdMs: number): Promise<void> {
  const server = ctx.postgres('postgres-restart');
  ctx.fault('postgres restart', 'start', undefined, `down ${holdMs} ms`, ['postgres']);
  await server.shutdown();
  await ctx.sleep(holdMs);
  await server.start();
  ctx.fault('postgres restart', 'end');
}

/** PostgreSQL (and in the `redis down` variant, Redis) cut off from every replica for `holdMs`. */
async function cutStores(ctx: FaultContext, fault: Extract<StoresFault, { kind: 'postgres-down' }>, holdMs: number, n: number): Promise<void> {
  const variant = fault.variants[n % fault.variants.length]!;
  ctx.fault('postgres down', 'start', undefined, `${holdMs} ms, ${variant}`, variant === 'redis down' ? ['postgres', 'redis'] : ['postgres']);
  for (const node of ctx.nodes) ctx.setProxies(node, { pg: { kind: 'cut' }, ...(variant === 'redis down' ? { redis: { kind: 'cut' } } : {}) });
  await ctx.sleep(holdMs);
  for (const node of ctx.nodes) ctx.setProxies(node, { pg: { kind: 'pass' }, ...(variant === 'redis down' ? { redis: { kind: 'pass' } } : {}) });
  ctx.fault('postgres down', 'end');
}

async function injectIntoReplica(ctx: FaultContext, fault: ReplicaFault, hold: Span, victim: Victim): Promise<void> {
  const { node, label } = victim;
  switch (fault.kind) {
    case 'pause': {
      const holdMs = draw(ctx, hold);
      ctx.fault('pause', 'start', node.name, `${label}, ${holdMs} ms`);
      ctx.pause(node); // a no-op for a replica stopped at its failpoint
      await ctx.sleep(holdMs);
      ctx.resume(node);
      ctx.fault('pause', 'end', node.name);
      return;
    }
    case 'crash': {
      ctx.fault('crash', 'start', node.name, label);
      await ctx.kill(node);
      await ctx.sleep(draw(ctx, hold));
      ctx.restart(node);
      ctx.fault('crash', 'end', node.name);
      return;
    }
    case 'partition': {
      const redisMode = ctx.random.pick(fault.redis);
      const holdMs = draw(ctx, hold);
      ctx.fault('partition', 'start', node.name, `${label}: redis ${redisMode.kind}, postgres stalled ${holdMs} ms`);
      ctx.setProxies(node, { redis: redisMode, pg: { kind: 'stall' } });
      // Stopped at its failpoint, it goes on now, into the partition.
      if (node.process.paused) ctx.resume(node);
      await ctx.sleep(holdMs);
      ctx.setProxies(node, { pg: { kind: 'pass' } }); // the held write arrives now, late
      await ctx.sleep(draw(ctx, fault.redisHealsAfter));
      ctx.setProxies(node, { redis: { kind: 'pass' } });
      if (redisMode.kind === 'drop') node.redisProxy?.resetConnections();
      ctx.fault('partition', 'end', node.name);
      return;
    }
    case 'connection-reset': {
      const holdMs = draw(ctx, hold);
      ctx.fault('connection reset', 'start', node.name, `${label}: its PostgreSQL connections reset, resumed after ${holdMs} ms`, ['postgres']);
      node.pgProxy.resetConnections();
      await ctx.sleep(holdMs);
      ctx.resume(node);
      ctx.fault('connection reset', 'end', node.name);
      return;
    }
    case 'stall':
      throw new Error('a stall is drawn before its victim and held by stall()');
    case 'failover-mid-catch-up': {
      const holdMs = draw(ctx, hold);
      const pausedAt = Date.now();
      const others = ctx.nodes.filter((n) => n !== node && n.process.running && !n.process.paused);
      for (const n of others) n.process.send({ kind: 'arm', failpoint: fault.failpoint, action: 'stop' });
      ctx.fault('pause', 'start', node.name, `${label}, ${holdMs} ms: fires pile up for the next leader`);
      ctx.pause(node);
      const isHit = (n: string, r: Record<string, unknown>) => n !== node.name && r['kind'] === 'failpoint' && r['name'] === fault.failpoint;
      const second = await ctx.waitForLine(isHit, holdMs + ctx.ttlMs * 4);
      for (const n of others) if (n.name !== second) n.process.send({ kind: 'disarm', failpoint: fault.failpoint });
      if (second !== undefined) {
        const stopped = ctx.node(second);
        await ctx.stoppedItself(stopped);
        ctx.fault('pause', 'start', second, 'the next leader, stopped in the middle of its catch-up batch');
        const isThirdElected = (n: string, r: Record<string, unknown>) => n !== second && n !== node.name && r['kind'] === 'belief' && r['leader'] === true;
        // The third leader takes over and catches up (one more TTL); then the second wakes up mid-batch.
        if ((await ctx.waitForLine(isThirdElected, ctx.ttlMs * 6)) !== undefined) await ctx.sleep(ctx.ttlMs);
        ctx.resume(stopped);
        ctx.fault('pause', 'end', second);
      }
      await ctx.sleep(holdMs - (Date.now() - pausedAt));
      ctx.resume(node);
      ctx.fault('pause', 'end', node.name);
      return;
    }
    case 'clock-step': {
      for (const stepMs of fault.stepsMs) {
        const holdMs = draw(ctx, hold);
        ctx.fault('clock step', 'start', ctx.nodes[0]!.name, `wall clock ${stepMs >= 0 ? '+' : ''}${stepMs / 1000} s for ${holdMs} ms (${label})`);
        ctx.stepClock(stepMs);
        await ctx.sleep(holdMs);
        ctx.stepClock(0);
        ctx.fault('clock step', 'end', ctx.nodes[0]!.name);
      }
      return;
    }
  }
}

async function injectIntoRedis(ctx: FaultContext, fault: RedisFault, holdMs: number, n: number): Promise<void> {
  switch (fault.kind) {
    case 'redis-restart': {
      const redis = ctx.proxiedRedis(fault.kind);
      ctx.fault('redis restart', 'start', undefined, `down ${holdMs} ms, data lost`);
      await redis.restartActive(holdMs);
      ctx.fault('redis restart', 'end');
      return;
    }
    case 'lossy-failover': {
      const redis = ctx.proxiedRedis(fault.kind);
      ctx.fault('replication held', 'start', undefined, 'writes on the primary no longer reach the replica');
      redis.holdReplication();
      await electOnPrimaryOnly(ctx);
      ctx.fault('failover', 'start', undefined, 'replica promoted (REPLICAOF NO ONE), clients repointed');
      await redis.promoteReplica();
      for (const node of ctx.nodes) node.redisProxy?.retarget(redis.activePort);
      ctx.fault('replication held', 'end');
      ctx.fault('failover', 'end');
      await ctx.sleep(holdMs);
      await redis.rejoinAsReplica();
      return;
    }
    case 'primary-failover': {
      const redis = ctx.replicatedRedis(fault.kind);
      const key = ctx.leaseKey;
      if (key === undefined) throw new Error('the primary-failover fault needs the app to name its lease key (SimApp.leaseKey)');
      const variant = fault.variants[n % fault.variants.length]!;
      if (variant === 'lossy') {
        ctx.fault('replication held', 'start', undefined, "writes on the lease's primary no longer reach its replicas");
        await redis.holdReplication(key);
        await electOnPrimaryOnly(ctx);
      }
      // The window that matters: the leader's write committed, its fire not yet recorded in Redis.
      const leader = variant === 'freeze' ? await ctx.waitForLeader(5000) : undefined;
      const stopped = leader !== undefined && (await ctx.stopAt(leader, fault.failpoint, ctx.ttlMs * 4));
      const primary = await redis.primaryFor(key);
      const frozenAt = Date.now();
      ctx.fault('primary frozen', 'start', undefined, `${redis.topology} primary :${primary.port} (SIGSTOP), ${variant}`);
      primary.pause();
      // The leader goes on: its record goes to the frozen primary.
      if (stopped) ctx.resume(leader);
      try {
        const promoted = await redis.waitForFailover(key, primary, 30_000);
        ctx.fault('failover', 'start', undefined, `:${promoted.port} promoted ${Date.now() - frozenAt} ms after the freeze`);
        ctx.fault('failover', 'end');
        await ctx.sleep(holdMs);
      } finally {
        if (variant === 'lossy') await redis.healReplication();
        // It wakes up believing it still is the primary, until it learns otherwise.
        primary.resume();
      }
      ctx.fault('primary frozen', 'end', undefined, 'resumed, deposed');
      if (variant === 'lossy') ctx.fault('replication held', 'end');
      return;
    }
  }
}

/**
 * Elections on the primary only, with replication held back. Two of them, so that after the failover
 * the counter goes back past a token that was used: the first election after a failover can burn a
 * token (an attempt replayed after a Cluster redirection, a reply from a server that not every
 * sentinel names yet, each handed back), and one burned token would hide a single repeat.
 */
const PRIMARY_ONLY_ELECTIONS = 2;

/**
 * With replication held back: kills the leader, so that the next election (a new token) and its
 * first write happen on the primary only, then restarts it; `PRIMARY_ONLY_ELECTIONS` times.
 */
async function electOnPrimaryOnly(ctx: FaultContext): Promise<void> {
  for (let i = 0; i < PRIMARY_ONLY_ELECTIONS; i++) {
    const leader = await ctx.waitForLeader(5000);
    if (leader === undefined) return;
    ctx.fault('crash', 'start', leader.name, 'leader, so that an election happens on the primary only');
    await ctx.kill(leader);
    const next = await ctx.waitForLine(isElected, ctx.ttlMs * 4);
    if (next !== undefined) await ctx.waitForLine(isWrite('committed', next), 3000);
    ctx.restart(leader);
    ctx.fault('crash', 'end', leader.name);
  }
}
