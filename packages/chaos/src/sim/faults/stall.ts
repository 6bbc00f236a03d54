import { draw, type ReplicaFaultKind } from './fault-kind.js';

/**
 * The event loop blocked for the hold (a busy loop inside the replica: CPU starvation, a long
 * garbage collection), not SIGSTOP: the process stays runnable and its sockets open, and nothing in
 * it runs. Aimed at the failpoint, it stalls there.
 */
export type StallFault = { readonly kind: 'stall' };

export const stall: ReplicaFaultKind<StallFault> = {
  target: 'replica',
  // Drawn before the victim: a leader stalled at its failpoint is held there from the hit on.
  holdAt: (ctx, _fault, hold) => ({ kind: 'stall', ms: draw(ctx, hold) }),
  async inject(ctx, _fault, { victim, heldAt }) {
    const holdMs = heldAt.kind === 'stall' ? heldAt.ms : 0;
    const { node, label } = victim;
    // A victim at its failpoint is stalled already; any other starts now.
    if (!victim.atFailpoint && !(await ctx.stallNow(node, holdMs))) return false;
    ctx.fault('stall', 'start', node.name, `${label}: event loop blocked ${holdMs} ms`);
    await ctx.sleep(holdMs);
    ctx.fault('stall', 'end', node.name);
    return true;
  },
};
