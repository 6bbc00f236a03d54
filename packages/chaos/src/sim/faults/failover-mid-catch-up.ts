import { draw, type ReplicaFaultKind } from './fault-kind.js';

/**
 * A failover in the middle of a catch-up batch: the leader is paused for the hold, so fires pile up
 * for the next one; the replica elected next stops itself at `failpoint` (its batch begun, the rest
 * still to go) and stays stopped until a third replica leads and has caught up; then it wakes up,
 * its batch half done, and after it the first leader. Needs three replicas.
 */
export type FailoverMidCatchUpFault = { readonly kind: 'failover-mid-catch-up'; readonly failpoint: string };

export const failoverMidCatchUp: ReplicaFaultKind<FailoverMidCatchUpFault> = {
  target: 'replica',
  async inject(ctx, fault, { hold, victim: { node, label } }) {
    const holdMs = draw(ctx, hold);
    const pausedAt = Date.now();
    const others = ctx.nodes.filter((n) => n !== node && n.process.running && !n.process.paused);
    for (const n of others) n.process.send({ kind: 'arm', failpoint: fault.failpoint, action: 'stop' });
    ctx.fault('pause', 'start', node.name, `${label}, ${holdMs} ms: fires pile up for the next leader`);
    ctx.pause(node);
    const isHit = (n: string, r: Record<string, unknown>) => n !== node.name && r['kind'] === 'failpoint' && r['name'] === fault.failpoint;
    const second = await ctx.waitForLine(isHit, holdMs + ctx.ttlMs * 4);
    for (const n of others) if (n.name !== second) n.process.send({ kind: 'disarm', failpoint: fault.failpoint });
    if (second !== undefined) {
      const stopped = ctx.node(second);
      await ctx.stoppedItself(stopped);
      ctx.fault('pause', 'start', second, 'the next leader, stopped in the middle of its catch-up batch');
      const isThirdElected = (n: string, r: Record<string, unknown>) => n !== second && n !== node.name && r['kind'] === 'belief' && r['leader'] === true;
      // The third leader takes over and catches up (one more TTL); then the second wakes up mid-batch.
      if ((await ctx.waitForLine(isThirdElected, ctx.ttlMs * 6)) !== undefined) await ctx.sleep(ctx.ttlMs);
      ctx.resume(stopped);
      ctx.fault('pause', 'end', second);
    }
    await ctx.sleep(holdMs - (Date.now() - pausedAt));
    ctx.resume(node);
    ctx.fault('pause', 'end', node.name);
    return true;
  },
};
