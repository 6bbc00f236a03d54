import type { ClockFault } from '../faketime.js';
import type { FaultContext, SimNode } from './fault-context.js';
import { isWrite, runFaultRounds, type FaultRound } from './fault-rounds.js';

/**
 * A fault scenario: the faults it injects, driven by the seeded random source of its context. Its
 * faults are data (`rounds`, for the one interpreter) or, where the steps depend on each other, a
 * `choreography`.
 */
export type Scenario = ScenarioSetting & (
  | { readonly rounds: FaultRound; readonly choreography?: never }
  | { readonly choreography: (ctx: FaultContext) => Promise<void>; readonly rounds?: never }
);

interface ScenarioSetting {
  readonly name: ScenarioName;
  /** One line: what breaks, and which protection must hold. */
  readonly summary: string;
  readonly redis: 'single' | 'failover';
  /** A clock fault for the first replica, for the whole run. */
  readonly clockFault?: ClockFault;
  /**
   * Where the control takes due times from. The control drops the protection a scenario exercises:
   * for a wall-clock fault that is the single clock, so its control schedules from the replica's own
   * wall clock; elsewhere it reads the Redis server's clock like the guarded run, so that what the
   * scenario shows is the fence and the dedupe at work.
   * @defaultValue `'server'`
   */
  readonly controlClock?: 'server' | 'local';
}

/** Injects a scenario's faults until the context's deadline. */
export function runScenarioFaults(scenario: Scenario, ctx: FaultContext): Promise<void> {
  return scenario.rounds !== undefined ? runFaultRounds(ctx, scenario.rounds) : scenario.choreography(ctx);
}

/** The leader in the middle of a write three times in five, the leader or a standby otherwise. */
const MOSTLY_MID_WRITE = { midWrite: 3, leader: 1, standby: 1 } as const;

export const SCENARIO_NAMES = ['pause', 'crash', 'partition', 'redis-failover', 'redis-restart', 'clock-skew', 'slow-clock'] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

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

export const scenarios: Record<ScenarioName, Scenario> = {
  pause: {
    name: 'pause',
    summary: 'SIGSTOP past the lease (GC, throttling): the leader wakes up mid-write after a new leader took over',
    redis: 'single',
    rounds: {
      gap: { ms: [300, 1200] },
      target: { kind: 'replica', weights: MOSTLY_MID_WRITE, during: 'begin' },
      fault: { kind: 'pause' },
      hold: { ttls: [1.5, 2.5] },
      settle: { ms: [800, 1600] },
      whileTtlsLeft: 3,
    },
  },

  crash: {
    name: 'crash',
    summary: 'SIGKILL and restart: a leader dies between its commit and its record, and the fire is dispatched again',
    redis: 'single',
    rounds: {
      gap: { ms: [300, 1200] },
      target: { kind: 'replica', weights: MOSTLY_MID_WRITE, during: 'committed' },
      fault: { kind: 'crash' },
      hold: { ms: [200, 800] },
      settle: { ttls: [1, 2] },
      whileTtlsLeft: 3,
    },
  },

  partition: {
    name: 'partition',
    summary: 'the leader loses Redis while its write to PostgreSQL is held in the network, then delivered late',
    redis: 'single',
    rounds: {
      gap: { ms: [300, 1200] },
      target: { kind: 'replica', weights: MOSTLY_MID_WRITE, during: 'begin' },
      fault: { kind: 'partition', redis: [{ kind: 'cut' }, { kind: 'drop' }], redisHealsAfter: { ms: [200, 600] } },
      hold: { ttls: [2, 3] },
      settle: { ms: [800, 1600] },
      whileTtlsLeft: 4,
    },
  },

  'redis-failover': {
    name: 'redis-failover',
    summary: 'replication held back, a new election on the primary, then the replica is promoted: the counter goes back',
    redis: 'failover',
    async choreography(ctx) {
      // Each round: hold replication, let an election happen on the primary only, promote the
      // replica and repoint every client, then bring the deposed primary back as the new replica.
      // The first round runs whatever the duration: it is the scenario.
      for (let round = 0; round === 0 || ctx.remainingMs > ctx.ttlMs * 8; round++) {
        await ctx.sleep(ctx.random.int(800, 1500));
        ctx.fault('replication held', 'start', undefined, 'writes on the primary no longer reach the replica');
        ctx.redis.holdReplication();
        const leader = await ctx.waitForLeader(5000);
        if (leader !== undefined) {
          ctx.fault('crash', 'start', leader.name, 'leader, so that an election happens on the primary only');
          await ctx.kill(leader);
          const next = await ctx.waitForLine((_n, r) => r['kind'] === 'belief' && r['leader'] === true, ctx.ttlMs * 4);
          if (next !== undefined) await ctx.waitForLine(isWrite('committed', next), 3000);
          ctx.restart(leader);
          ctx.fault('crash', 'end', leader.name);
        }
        ctx.fault('failover', 'start', undefined, 'replica promoted (REPLICAOF NO ONE), clients repointed');
        await ctx.redis.promoteReplica();
        for (const node of ctx.nodes) node.redisProxy.retarget(ctx.redis.activePort);
        ctx.fault('replication held', 'end');
        ctx.fault('failover', 'end');
        await ctx.sleep(ctx.random.int(ctx.ttlMs * 2, ctx.ttlMs * 3));
        await ctx.redis.rejoinAsReplica();
      }
      await ctx.sleep(ctx.remainingMs);
    },
  },

  'redis-restart': {
    name: 'redis-restart',
    summary: 'Redis restarts without persistence: the lease and the token counter are gone',
    redis: 'single',
    rounds: {
      gap: { ms: [1500, 3000] },
      target: { kind: 'redis' },
      fault: { kind: 'redis-restart' },
      hold: { ms: [800, 1500] },
      settle: { ttls: [1, 2] },
      whileTtlsLeft: 3,
    },
  },

  'clock-skew': {
    name: 'clock-skew',
    summary: "one replica's wall clock runs 5 s ahead (libfaketime); leadership moves to it and away",
    redis: 'single',
    clockFault: { kind: 'offset', offsetMs: 5000 },
    controlClock: 'local',
    async choreography(ctx) {
      const skewed = ctx.nodes[0]!;
      while (ctx.remainingMs > ctx.ttlMs * 4) {
        await makeLeader(ctx, skewed);
        if (ctx.leader() !== skewed) continue; // the handover did not take: try again
        // Long enough for its schedule to run on its own clock for a while.
        await ctx.sleep(ctx.random.int(2500, 4000));
        const leader = ctx.leader();
        if (leader === undefined || ctx.remainingMs < ctx.ttlMs * 4) continue;
        ctx.fault('kill', 'start', leader.name, 'leadership moves away');
        await ctx.kill(leader);
        await ctx.sleep(ctx.ttlMs / 2);
        ctx.restart(leader);
        ctx.fault('kill', 'end', leader.name);
        await ctx.sleep(ctx.random.int(1500, 3000));
      }
    },
  },

  'slow-clock': {
    name: 'slow-clock',
    summary: "one replica's clocks run at a quarter speed (libfaketime): it keeps believing it leads after its lease ended",
    redis: 'single',
    clockFault: { kind: 'rate', rate: 0.25 },
    async choreography(ctx) {
      const slow = ctx.nodes[0]!;
      while (ctx.remainingMs > ctx.ttlMs * 4) {
        // A fresh start: its clock begins on time and falls behind from there (as a replica that just
        // booted on a throttled or misconfigured host), so it does act while it still leads.
        if (ctx.leader() !== slow) {
          ctx.fault('restart', 'start', slow.name, 'restarted with its slow clock');
          await ctx.kill(slow);
          ctx.restart(slow);
          ctx.fault('restart', 'end', slow.name);
          await ctx.sleep(ctx.ttlMs);
        }
        await makeLeader(ctx, slow);
        // Its renews come four times too late: the lease lapses, another replica is elected, and the
        // slow one goes on dispatching on its stretched deadline.
        await ctx.sleep(ctx.random.int(ctx.ttlMs * 3, ctx.ttlMs * 5));
      }
    },
  },
};
