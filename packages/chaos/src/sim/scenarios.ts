import type { ClockFault } from '../faketime.js';
import type { FaultRound } from './fault-rounds.js';
import type { RedisKind } from './sim-redis.js';

/** A fault scenario: its setting, and the round of faults that one interpreter repeats. */
export interface Scenario {
  readonly name: ScenarioName;
  /** One line: what breaks, and which protection must hold. */
  readonly summary: string;
  readonly redis: RedisKind;
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
  readonly rounds: FaultRound;
}

/** The leader in the middle of a write three times in five, the leader or a standby otherwise. */
const MOSTLY_MID_WRITE = { midWrite: 3, leader: 1, standby: 1 } as const;

/** Cluster and Sentinel alike: every run goes through both variants (`atLeastOnce`), whatever its fault time. */
const PRIMARY_FAILOVER: FaultRound = {
  gap: { ms: [500, 1000] },
  target: { kind: 'redis' },
  fault: { kind: 'primary-failover', variants: ['freeze', 'lossy'] },
  // Frozen this much longer after the promotion.
  hold: { ms: [0, 500] },
  settle: { ms: [500, 1000] },
  whileTtlsLeft: 8,
  atLeastOnce: true,
};

export const SCENARIO_NAMES = ['pause', 'crash', 'partition', 'redis-failover', 'redis-restart', 'clock-skew', 'slow-clock', 'cluster-failover', 'sentinel-failover'] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

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
    rounds: {
      gap: { ms: [800, 1500] },
      target: { kind: 'redis' },
      fault: { kind: 'lossy-failover' },
      // From the promotion until the deposed primary rejoins as the new replica.
      hold: { ttls: [2, 3] },
      settle: { ms: [0, 0] },
      whileTtlsLeft: 8,
      atLeastOnce: true,
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
    rounds: {
      setup: { kind: 'lead-clock-faulted', freshStart: false },
      // Long enough for its schedule to run on its own clock for a while; then leadership moves away,
      // unless the run is nearly over (then the skewed replica keeps leading to the end).
      gap: { ms: [2500, 4000] },
      hitWhileTtlsLeft: 4,
      target: { kind: 'leader' },
      fault: { kind: 'crash' },
      hold: { ttls: [0.5, 0.5] },
      settle: { ms: [1500, 3000] },
      whileTtlsLeft: 4,
    },
  },

  'slow-clock': {
    name: 'slow-clock',
    summary: "one replica's clocks run at a quarter speed (libfaketime): it keeps believing it leads after its lease ended",
    redis: 'single',
    clockFault: { kind: 'rate', rate: 0.25 },
    rounds: {
      // A fresh start: its clock begins on time and falls behind from there, so it does act while it
      // still leads. Its renews then come four times too late: the lease lapses, another replica is
      // elected, and the slow one goes on dispatching on its stretched deadline.
      setup: { kind: 'lead-clock-faulted', freshStart: true },
      gap: { ttls: [3, 5] },
      target: { kind: 'none' },
      settle: { ms: [0, 0] },
      whileTtlsLeft: 4,
    },
  },

  'cluster-failover': {
    name: 'cluster-failover',
    summary: "Redis Cluster: the lease's primary freezes until a replica is promoted, then wakes up deposed; lossy too",
    redis: 'cluster',
    rounds: PRIMARY_FAILOVER,
  },

  'sentinel-failover': {
    name: 'sentinel-failover',
    summary: 'Sentinel: the primary freezes until a replica is promoted, then wakes up deposed; lossy too',
    redis: 'sentinel',
    rounds: PRIMARY_FAILOVER,
  },
};
