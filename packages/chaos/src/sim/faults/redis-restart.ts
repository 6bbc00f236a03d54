import type { DeploymentFaultKind } from './fault-kind.js';

/** The Redis server restarts without persistence after being down for the hold. */
export type RedisRestartFault = { readonly kind: 'redis-restart' };

export const redisRestart: DeploymentFaultKind<'redis', RedisRestartFault> = {
  target: 'redis',
  async inject(ctx, fault, { holdMs }) {
    const redis = ctx.proxiedRedis(fault.kind);
    ctx.fault('redis restart', 'start', undefined, `down ${holdMs} ms, data lost`);
    await redis.restartActive(holdMs);
    ctx.fault('redis restart', 'end');
  },
};
