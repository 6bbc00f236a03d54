import { draw, type ReplicaFaultKind } from './fault-kind.js';

/** SIGKILL, then a restart after the hold. */
export type CrashFault = { readonly kind: 'crash' };

export const crash: ReplicaFaultKind<CrashFault> = {
  target: 'replica',
  async inject(ctx, _fault, { hold, victim: { node, label } }) {
    ctx.fault('crash', 'start', node.name, label);
    await ctx.kill(node);
    await ctx.sleep(draw(ctx, hold));
    ctx.restart(node);
    ctx.fault('crash', 'end', node.name);
    return true;
  },
};
