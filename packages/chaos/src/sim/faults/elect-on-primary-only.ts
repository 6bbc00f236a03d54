import type { FaultContext } from '../fault-context.js';
import { isElected, isWrite } from './fault-kind.js';

/**
 * Elections on the primary only, with replication held back. Two of them, so that after the failover
 * the counter goes back past a token that was used: the first election after a failover can burn a
 * token (an attempt replayed after a Cluster redirection, a reply from a server that not every
 * sentinel names yet, each handed back), and one burned token would hide a single repeat.
 */
const PRIMARY_ONLY_ELECTIONS = 2;

/**
 * With replication held back: kills the leader, so that the next election (a new token) and its
 * first write happen on the primary only, then restarts it; `PRIMARY_ONLY_ELECTIONS` times.
 */
export async function electOnPrimaryOnly(ctx: FaultContext): Promise<void> {
  for (let i = 0; i < PRIMARY_ONLY_ELECTIONS; i++) {
    const leader = await ctx.waitForLeader(5000);
    if (leader === undefined) return;
    ctx.fault('crash', 'start', leader.name, 'leader, so that an election happens on the primary only');
    await ctx.kill(leader);
    // Deadlines, not delays: on a loaded machine the next election can take longer than a few TTLs,
    // and a variant whose primary-only elections never happened cannot show the counter going back.
    const next = await ctx.waitForLine(isElected, ctx.ttlMs * 8);
    if (next !== undefined) await ctx.waitForLine(isWrite('committed', next), Math.max(3000, ctx.ttlMs * 3));
    ctx.restart(leader);
    ctx.fault('crash', 'end', leader.name);
  }
}
