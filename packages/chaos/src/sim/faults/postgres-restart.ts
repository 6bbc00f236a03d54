import type { DeploymentFaultKind } from './fault-kind.js';

/**
 * The run's own PostgreSQL server shut down (fast: every session ended, transactions in flight
 * rolled back) and started again after the hold, while the replicas write.
 */
export type PostgresRestartFault = { readonly kind: 'postgres-restart' };

export const postgresRestart: DeploymentFaultKind<'stores', PostgresRestartFault> = {
  target: 'stores',
  async inject(ctx, fault, { holdMs }) {
    const server = ctx.postgres(fault.kind);
    ctx.fault('postgres restart', 'start', undefined, `down ${holdMs} ms`, ['postgres']);
    await server.shutdown();
    await ctx.sleep(holdMs);
    await server.start();
    ctx.fault('postgres restart', 'end');
  },
};
