import { electOnPrimaryOnly } from './elect-on-primary-only.js';
import type { DeploymentFaultKind } from './fault-kind.js';

export type PrimaryFailoverVariant = 'freeze' | 'lossy';

/**
 * Redis Cluster or Sentinel: the primary that serves the lease is frozen (SIGSTOP) until the
 * deployment promotes one of its replicas, stays frozen for the hold, then resumes, still believing
 * it is the primary until it learns otherwise. Round n takes variant n (cycling):
 * - `freeze`: frozen while the leader stands at `failpoint` (its write committed, the fire not yet
 *   recorded);
 * - `lossy`: replication is held back first and the leader crashed twice, so that two elections
 *   (new tokens) and their writes happen on that primary only: the promoted replica has seen none.
 */
export type PrimaryFailoverFault = {
  readonly kind: 'primary-failover';
  readonly variants: readonly [PrimaryFailoverVariant, ...PrimaryFailoverVariant[]];
  /** Where the leader is when the freeze starts: the app's failpoint between a fire's write and its record. */
  readonly failpoint: string;
};

export const primaryFailover: DeploymentFaultKind<'redis', PrimaryFailoverFault> = {
  target: 'redis',
  async inject(ctx, fault, { holdMs, round }) {
    const redis = ctx.replicatedRedis(fault.kind);
    const key = ctx.leaseKey;
    if (key === undefined) throw new Error('the primary-failover fault needs the app to name its lease key (SimApp.leaseKey)');
    const variant = fault.variants[round % fault.variants.length]!;
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
  },
};
