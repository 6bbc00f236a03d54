import { draw, type ReplicaFaultKind } from './fault-kind.js';

/**
 * Every PostgreSQL connection of the replica reset by its proxy (each backend ends and rolls its
 * transaction back, as under pg_terminate_backend, a failover or a network fault); aimed at the
 * failpoint inside the guarded transaction, the replica stands there while it happens and goes on
 * after the hold, into a connection that is gone.
 */
export type ConnectionResetFault = { readonly kind: 'connection-reset' };

export const connectionReset: ReplicaFaultKind<ConnectionResetFault> = {
  target: 'replica',
  async inject(ctx, _fault, { hold, victim: { node, label } }) {
    const holdMs = draw(ctx, hold);
    ctx.fault('connection reset', 'start', node.name, `${label}: its PostgreSQL connections reset, resumed after ${holdMs} ms`, ['postgres']);
    node.pgProxy.resetConnections();
    await ctx.sleep(holdMs);
    ctx.resume(node);
    ctx.fault('connection reset', 'end', node.name);
    return true;
  },
};
