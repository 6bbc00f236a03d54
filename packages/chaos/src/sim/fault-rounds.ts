import type { ProxyMode } from '../fault-proxy.js';
import type { FaultContext, SimNode } from './fault-context.js';

/**
 * Faults as data (Jepsen's nemesis, TigerBeetle's simulator): a scenario made of rounds says what to
 * hit, with which fault, for how long, and how to heal; `runFaultRounds` is the one interpreter.
 * Randomness comes from the run's seeded source, drawn in a fixed order, so a seed replays a schedule.
 */

/** A duration: milliseconds, or multiples of the lease TTL, drawn uniformly. */
export type Span =
  | { readonly ms: readonly [number, number] }
  /** Whole milliseconds in [min × TTL, max × TTL]. */
  | { readonly ttls: readonly [number, number] };

/** Who a round hits, by weight: the leader in the middle of a write (most harmful), the leader, a standby, or Redis. */
export type Target =
  | { readonly kind: 'replica'; readonly weights: { readonly midWrite: number; readonly leader: number; readonly standby: number }; readonly during: 'begin' | 'committed' }
  | { readonly kind: 'redis' };

export type Fault =
  /** SIGSTOP, then SIGCONT after the hold. */
  | { readonly kind: 'pause' }
  /** SIGKILL, then a restart after the hold. */
  | { readonly kind: 'crash' }
  /** Redis cut or dropped (half-open) and PostgreSQL stalled; after the hold PostgreSQL delivers the held write, late; Redis heals `redisHealsAfter` later. */
  | { readonly kind: 'partition'; readonly redis: readonly ProxyMode[]; readonly redisHealsAfter: Span }
  /** The Redis server restarts without persistence after being down for the hold. */
  | { readonly kind: 'redis-restart' };

export interface FaultRound {
  /** Quiet time before the round. */
  readonly gap: Span;
  readonly target: Target;
  readonly fault: Fault;
  /** How long the fault lasts. */
  readonly hold: Span;
  /** Quiet time after healing. */
  readonly settle: Span;
  /** Rounds start only while more than this many TTLs of the fault time remain. */
  readonly whileTtlsLeft: number;
}

function draw(ctx: FaultContext, span: Span): number {
  if ('ms' in span) return ctx.random.int(span.ms[0], span.ms[1]);
  return ctx.random.int(Math.round(ctx.ttlMs * span.ttls[0]), Math.round(ctx.ttlMs * span.ttls[1]));
}

/** Matches a replica's report of a write with `outcome` (by `node`, when given). */
export const isWrite = (outcome: string, node?: string) => (n: string, r: Record<string, unknown>) => r['kind'] === 'write' && r['outcome'] === outcome && (node === undefined || n === node);

/** Picks the victim by the target's weights; undefined when there is none right now (the round is skipped). */
async function pickReplica(ctx: FaultContext, target: Extract<Target, { kind: 'replica' }>): Promise<{ node: SimNode; label: string } | undefined> {
  const { midWrite, leader: leaderWeight, standby } = target.weights;
  const kinds = [...Array<'mid-write'>(midWrite).fill('mid-write'), ...Array<'leader'>(leaderWeight).fill('leader'), ...Array<'standby'>(standby).fill('standby')];
  const kind = ctx.random.pick(kinds);
  const leader = await ctx.waitForLeader(5000);
  if (kind === 'standby') {
    const standbys = ctx.standbys();
    return standbys.length === 0 ? undefined : { node: ctx.random.pick(standbys), label: 'standby' };
  }
  if (leader === undefined) return undefined;
  if (kind === 'leader') return { node: leader, label: 'leader' };
  const name = await ctx.waitForLine(isWrite(target.during, leader.name), 5000);
  return name === undefined ? undefined : { node: ctx.node(name), label: target.during === 'begin' ? 'leader mid-write' : 'leader after commit' };
}

/** Runs `round` again and again until the fault time runs out. */
export async function runFaultRounds(ctx: FaultContext, round: FaultRound): Promise<void> {
  while (ctx.remainingMs > ctx.ttlMs * round.whileTtlsLeft) {
    await ctx.sleep(draw(ctx, round.gap));
    if (round.target.kind === 'redis') {
      const downMs = draw(ctx, round.hold);
      ctx.fault('redis restart', 'start', undefined, `down ${downMs} ms, data lost`);
      await ctx.redis.restartActive(downMs);
      ctx.fault('redis restart', 'end');
    } else {
      const victim = await pickReplica(ctx, round.target);
      if (victim === undefined) continue;
      await inject(ctx, round, victim);
    }
    await ctx.sleep(draw(ctx, round.settle));
  }
}

async function inject(ctx: FaultContext, round: FaultRound, victim: { node: SimNode; label: string }): Promise<void> {
  const { node, label } = victim;
  const fault = round.fault;
  switch (fault.kind) {
    case 'pause': {
      const holdMs = draw(ctx, round.hold);
      ctx.fault('pause', 'start', node.name, `${label}, ${holdMs} ms`);
      ctx.pause(node);
      await ctx.sleep(holdMs);
      ctx.resume(node);
      ctx.fault('pause', 'end', node.name);
      return;
    }
    case 'crash': {
      ctx.fault('crash', 'start', node.name, label);
      await ctx.kill(node);
      await ctx.sleep(draw(ctx, round.hold));
      ctx.restart(node);
      ctx.fault('crash', 'end', node.name);
      return;
    }
    case 'partition': {
      const redisMode = ctx.random.pick(fault.redis);
      const holdMs = draw(ctx, round.hold);
      ctx.fault('partition', 'start', node.name, `${label}: redis ${redisMode.kind}, postgres stalled ${holdMs} ms`);
      ctx.setProxies(node, { redis: redisMode, pg: { kind: 'stall' } });
      await ctx.sleep(holdMs);
      ctx.setProxies(node, { pg: { kind: 'pass' } }); // the held write arrives now, late
      await ctx.sleep(draw(ctx, fault.redisHealsAfter));
      ctx.setProxies(node, { redis: { kind: 'pass' } });
      if (redisMode.kind === 'drop') node.redisProxy.resetConnections();
      ctx.fault('partition', 'end', node.name);
      return;
    }
    case 'redis-restart':
      throw new Error('redis-restart targets Redis, not a replica');
  }
}
