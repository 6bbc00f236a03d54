import { electOnPrimaryOnly } from './elect-on-primary-only.js';
import type { DeploymentFaultKind } from './fault-kind.js';

/**
 * Replication is held back, the leader is killed twice so that two elections (new tokens) happen on
 * the primary only, then the replica is promoted and every client repointed: the counter goes back.
 * After the hold the deposed primary rejoins, empty, as the new replica.
 */
export type LossyFailoverFault = { readonly kind: 'lossy-failover' };

export const lossyFailover: DeploymentFaultKind<'redis', LossyFailoverFault> = {
  target: 'redis',
  async inject(ctx, fault, { holdMs }) {
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
  },
};
