import type { ServiceFault } from '../sim-app.js';
import type { DeploymentFaultKind } from './fault-kind.js';

/**
 * The service the job writes through fails while every replica and store stays up, so the leader
 * keeps its lease and must deliver each fire again itself; round n takes variant n (cycling):
 * answering 503 to every call, or carrying each call out and losing its answer (a retry must then
 * take effect once).
 */
export type ServiceDownFault = { readonly kind: 'service-down'; readonly variants: readonly [ServiceFault, ...ServiceFault[]] };

export const serviceDown: DeploymentFaultKind<'service', ServiceDownFault> = {
  target: 'service',
  async inject(ctx, fault, { holdMs, round }) {
    const variant = fault.variants[round % fault.variants.length]!;
    await ctx.faultService(variant);
    ctx.fault('service down', 'start', undefined, `${holdMs} ms, ${variant}`);
    try {
      await ctx.sleep(holdMs);
    } finally {
      await ctx.faultService(null);
      ctx.fault('service down', 'end');
    }
  },
};
