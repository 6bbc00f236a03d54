import { draw, type ReplicaFaultKind } from './fault-kind.js';

/** SIGSTOP, then SIGCONT after the hold. */
export type PauseFault = { readonly kind: 'pause' };

export const pause: ReplicaFaultKind<PauseFault> = {
  target: 'replica',
  async inject(ctx, _fault, { hold, victim: { node, label } }) {
    const holdMs = draw(ctx, hold);
    ctx.fault('pause', 'start', node.name, `${label}, ${holdMs} ms`);
    ctx.pause(node); // a no-op for a replica stopped at its failpoint
    await ctx.sleep(holdMs);
    ctx.resume(node);
    ctx.fault('pause', 'end', node.name);
    return true;
  },
};
