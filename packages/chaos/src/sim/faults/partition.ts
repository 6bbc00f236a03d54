import type { ProxyMode } from '../../fault-proxy.js';
import { draw, type ReplicaFaultKind, type Span } from './fault-kind.js';

/** Redis cut or dropped (half-open) and PostgreSQL stalled; after the hold PostgreSQL delivers the held write, late; Redis heals `redisHealsAfter` later. */
export type PartitionFault = { readonly kind: 'partition'; readonly redis: readonly ProxyMode[]; readonly redisHealsAfter: Span };

export const partition: ReplicaFaultKind<PartitionFault> = {
  target: 'replica',
  async inject(ctx, fault, { hold, victim: { node, label } }) {
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
    return true;
  },
};
