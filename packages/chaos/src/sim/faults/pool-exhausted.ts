import { draw, type ReplicaFaultKind } from './fault-kind.js';

/**
 * Every connection of the leader's database pool taken by other work of the same process (a slow
 * report, a leaking code path) for the hold, while its lease lives elsewhere and stays renewed: its
 * guarded writes wait for a connection, time out (the pool's own timeout) and fail closed, and the
 * scheduler must deliver them again once the pool frees up. The replica holds the connections
 * itself, on a command (see `SimApp.replicasHoldPool`).
 */
export type PoolExhaustedFault = { readonly kind: 'pool-exhausted' };

export const poolExhausted: ReplicaFaultKind<PoolExhaustedFault> = {
  target: 'replica',
  async inject(ctx, _fault, { hold, victim }) {
    const holdMs = draw(ctx, hold);
    const { node, label } = victim;
    const held = await ctx.holdPool(node, holdMs);
    if (held === undefined) return false;
    ctx.fault('pool exhausted', 'start', node.name, `${label}: ${held} connections held ${holdMs} ms`);
    await ctx.waitForLine((n, r) => n === node.name && r['kind'] === 'pool-released', holdMs + 5000, true);
    ctx.fault('pool exhausted', 'end', node.name);
    return true;
  },
};
