import type { ProxyMode } from '../../fault-proxy.js';
import type { HistoryEvent } from '../../history.js';
import { draw, isElected, preconditionMissed, type ReplicaFaultKind, type Span } from './fault-kind.js';

/** Redis cut or dropped (half-open) and PostgreSQL stalled; after the hold PostgreSQL delivers the held write, late; Redis heals `redisHealsAfter` later. */
export type PartitionFault = { readonly kind: 'partition'; readonly redis: readonly ProxyMode[]; readonly redisHealsAfter: Span };

export const partition: ReplicaFaultKind<PartitionFault> = {
  target: 'replica',
  async inject(ctx, fault, { hold, victim: { node, label } }) {
    const redisMode = ctx.random.pick(fault.redis);
    const holdMs = draw(ctx, hold);
    const startedAt = Date.now();
    ctx.fault('partition', 'start', node.name, `${label}: redis ${redisMode.kind}, postgres stalled ${holdMs} ms`);
    ctx.setProxies(node, { redis: redisMode, pg: { kind: 'stall' } });
    // Stopped at its failpoint, it goes on now, into the partition.
    if (node.process.paused) ctx.resume(node);
    await ctx.sleep(holdMs);
    // A leader's held write must arrive after the next term began (its election raised the fences),
    // or nothing refuses it: on a loaded machine that election came 3 s into a 2.7 s hold (a
    // toothless run beside four CPU hogs). So the stall lasts until another replica is elected, five
    // TTLs more at most, and a miss is said in the history.
    if (heldWriteMustWait(ctx.history.events, node.name, startedAt)) {
      const other = await ctx.waitForLine((n, r) => n !== node.name && isElected(n, r), ctx.ttlMs * 5, true);
      if (other === undefined) preconditionMissed(ctx, `partition of ${node.name}: no other replica was elected within ${holdMs + ctx.ttlMs * 5} ms, so its held write arrived before any newer term`);
    }
    ctx.setProxies(node, { pg: { kind: 'pass' } }); // the held write arrives now, late
    await ctx.sleep(draw(ctx, fault.redisHealsAfter));
    ctx.setProxies(node, { redis: { kind: 'pass' } });
    if (redisMode.kind === 'drop') node.redisProxy?.resetConnections();
    ctx.fault('partition', 'end', node.name);
    return true;
  },
};

/**
 * Whether a partitioned replica's held write must wait longer before it arrives: `victim` led when
 * the partition began (`since`), and no other replica has been elected since. Its write arriving
 * before any newer term would meet no fence above it, and the run would show no protection.
 */
export function heldWriteMustWait(history: readonly HistoryEvent[], victim: string, since: number): boolean {
  let led = false;
  let electedElsewhere = false;
  for (const e of history) {
    if (e.kind !== 'belief') continue;
    if (e.node === victim && e.at < since) led = e.leader;
    else if (e.node !== victim && e.leader && e.at >= since) electedElsewhere = true;
  }
  return led && !electedElsewhere;
}
