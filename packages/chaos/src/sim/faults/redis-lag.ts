import { draw, type ReplicaFaultKind, type Span } from './fault-kind.js';

/**
 * The replica's link to Redis slowed, not cut: every request and every reply `delay` late for the
 * hold (a congested network, an overloaded Redis host). Its renewals reach Redis after the lease ran
 * out, so another replica is elected while this one still works: it must stop believing it leads by
 * the deadline it counted from its send (the late replies must not extend it), and its fire records,
 * late, must not count for a term that is over. Nothing else of it is slowed: its writes to
 * PostgreSQL go out at once.
 */
export type RedisLagFault = { readonly kind: 'redis-lag'; readonly delay: Span };

export const redisLag: ReplicaFaultKind<RedisLagFault> = {
  target: 'replica',
  async inject(ctx, fault, { hold, victim: { node, label } }) {
    if (node.redisProxy === undefined) return false;
    const delayMs = draw(ctx, fault.delay);
    const holdMs = draw(ctx, hold);
    ctx.fault('redis lag', 'start', node.name, `${label}: Redis ${delayMs} ms away for ${holdMs} ms`, ['redis']);
    ctx.setProxies(node, { redis: { kind: 'delay', delayMs } });
    if (node.process.paused) ctx.resume(node);
    await ctx.sleep(holdMs);
    ctx.setProxies(node, { redis: { kind: 'pass' } });
    ctx.fault('redis lag', 'end', node.name);
    return true;
  },
};
