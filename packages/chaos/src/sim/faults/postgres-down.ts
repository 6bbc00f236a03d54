import type { DeploymentFaultKind } from './fault-kind.js';

export type PostgresDownVariant = 'redis up' | 'redis down';

/**
 * PostgreSQL unreachable for every replica (their proxies cut: connections reset, new ones refused)
 * for the hold; round n takes variant n (cycling): with Redis up, or with Redis cut too.
 */
export type PostgresDownFault = { readonly kind: 'postgres-down'; readonly variants: readonly [PostgresDownVariant, ...PostgresDownVariant[]] };

export const postgresDown: DeploymentFaultKind<'stores', PostgresDownFault> = {
  target: 'stores',
  async inject(ctx, fault, { holdMs, round }) {
    const variant = fault.variants[round % fault.variants.length]!;
    const withRedis = variant === 'redis down';
    ctx.fault('postgres down', 'start', undefined, `${holdMs} ms, ${variant}`, withRedis ? ['postgres', 'redis'] : ['postgres']);
    for (const node of ctx.nodes) ctx.setProxies(node, { pg: { kind: 'cut' }, ...(withRedis ? { redis: { kind: 'cut' } } : {}) });
    await ctx.sleep(holdMs);
    for (const node of ctx.nodes) ctx.setProxies(node, { pg: { kind: 'pass' }, ...(withRedis ? { redis: { kind: 'pass' } } : {}) });
    ctx.fault('postgres down', 'end');
  },
};
