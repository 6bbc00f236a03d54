import { ConfigError } from '@fenced/shared';
import { assignLeases } from '../lease-group/assignment.js';
import type { LeaseGroup } from '../lease-group/lease-group.js';
import { createScheduler, type CreateSchedulerOptions, type Scheduler } from './scheduler.js';

export type CreateShardedSchedulerOptions = Omit<CreateSchedulerOptions, 'coordinator'> & {
  /** The lease group whose leases are the shards. */
  group: LeaseGroup;
};

/**
 * Jobs spread over the leases (shards) of a lease group: each job belongs to one shard, and that
 * shard's leader dispatches it with the shard's own token, so the group's processes share the jobs
 * as they share the leases. Fence each shard's resources with that shard's fences.
 */
export interface ShardedScheduler {
  /** The shard (lease) each job belongs to. */
  shardOf(job: string): string;
  /** The scheduler of one shard (only shards that got jobs have one). */
  shard(lease: string): Scheduler | undefined;
  start(): void;
  /** Stops every shard's dispatching and waits for the fires in flight. */
  stop(): Promise<void>;
}

/**
 * Creates one scheduler per shard with the jobs assigned to it (the same balanced hashing that shares
 * the leases among processes shares the jobs among shards, so each shard gets ⌊J/S⌋ or ⌈J/S⌉).
 *
 * @throws {ConfigError} for bad options.
 */
export function createShardedScheduler(options: CreateShardedSchedulerOptions): ShardedScheduler {
  const { group, jobs, ...rest } = options;
  if (typeof group?.lease !== 'function' || !Array.isArray(group.leases)) {
    throw new ConfigError('sharded scheduler', [{ path: 'group', message: 'must be a LeaseGroup' }]);
  }
  const shardOfJob = assignLeases(Object.keys(jobs ?? {}), group.leases);
  const schedulers = new Map<string, Scheduler>();
  for (const lease of group.leases) {
    const mine = Object.entries(jobs).filter(([name]) => shardOfJob.get(name) === lease);
    if (mine.length > 0) schedulers.set(lease, createScheduler({ ...rest, coordinator: group.lease(lease), jobs: Object.fromEntries(mine) }));
  }
  return {
    shardOf(job) {
      const shard = shardOfJob.get(job);
      if (shard === undefined) throw new ConfigError('sharded scheduler', [{ path: 'job', message: `no job ${JSON.stringify(job)}` }]);
      return shard;
    },
    shard: (lease) => schedulers.get(lease),
    start() {
      for (const scheduler of schedulers.values()) scheduler.start();
    },
    async stop() {
      await Promise.all([...schedulers.values()].map((s) => s.stop()));
    },
  };
}
