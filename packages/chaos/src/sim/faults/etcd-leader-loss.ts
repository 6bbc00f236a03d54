import { draw, type ReplicaFaultKind } from './fault-kind.js';

/** What happens to the etcd cluster while the fenced leader is held mid-write; rounds cycle through them. */
export type EtcdLeaderLossVariant = 'kill' | 'pause' | 'partition' | 'quorum' | 'wipe';

/**
 * The fenced leader stopped mid-write (SIGSTOP) while the etcd cluster loses its own leader: killed,
 * frozen, cut off, or quorum lost (two members down), or a member comes back with an empty data
 * directory. The fenced lease runs out meanwhile; once etcd has a leader again a standby is elected,
 * and the old leader resumes its write, late, with the old token. etcd's revisions must keep the new
 * term's token above it whatever etcd went through.
 */
export type EtcdLeaderLossFault = { readonly kind: 'etcd-leader-loss'; readonly variants: readonly EtcdLeaderLossVariant[] };

/** Rounds hit so far, per run: each round takes the next variant, so a run goes through them all. */
const roundsHit = new WeakMap<object, number>();

export const etcdLeaderLoss: ReplicaFaultKind<EtcdLeaderLossFault> = {
  target: 'replica',
  async inject(ctx, fault, { hold, victim: { node, label } }) {
    const etcd = ctx.etcd(fault.kind);
    const n = roundsHit.get(ctx) ?? 0;
    roundsHit.set(ctx, n + 1);
    const variant = fault.variants[n % fault.variants.length]!;
    const holdMs = draw(ctx, hold);
    const etcdLeader = (await etcd.leader()) ?? etcd.members[0]!;
    ctx.fault('etcd leader loss', 'start', node.name, `${label} held ${holdMs} ms; etcd ${variant} (${etcdLeader.name})`);
    ctx.pause(node); // a no-op for a replica stopped at its failpoint
    switch (variant) {
      case 'kill':
        await etcdLeader.kill();
        break;
      case 'pause':
        etcdLeader.pause();
        break;
      case 'partition':
        etcd.partition(etcdLeader);
        break;
      case 'quorum': {
        // The leader and one other member down: one of three left, no majority.
        const survivor = etcd.members.find((m) => m !== etcdLeader);
        await Promise.all(etcd.members.filter((m) => m !== survivor).map((m) => m.kill()));
        break;
      }
      case 'wipe':
        await etcd.replaceWithEmptyDataDir(etcd.members.find((m) => m !== etcdLeader)!);
        break;
    }
    // Half the hold with etcd hurt, then etcd healed while the old leader is still frozen: a new
    // term can begin before it wakes.
    await ctx.sleep(Math.round(holdMs / 2));
    for (const m of etcd.members) {
      etcd.heal(m);
      m.resume();
      if (!m.running) await m.start();
    }
    await etcd.waitForLeader(30_000).catch(() => undefined);
    await ctx.sleep(Math.round(holdMs / 2));
    ctx.resume(node);
    ctx.fault('etcd leader loss', 'end', node.name);
    return true;
  },
};
