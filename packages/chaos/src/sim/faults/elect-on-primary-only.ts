import type { FaultContext } from '../fault-context.js';
import { isElected, isWrite, preconditionMissed as missed } from './fault-kind.js';

/**
 * Elections on the primary only, with replication held back. Two of them, so that after the failover
 * the counter goes back past a token that was used: the first election after a failover can burn a
 * token (an attempt replayed after a Cluster redirection, a reply from a server that not every
 * sentinel names yet, each handed back), and one burned token would hide a single repeat.
 */
const PRIMARY_ONLY_ELECTIONS = 2;

/**
 * With replication held back: kills the leader, so that the next election (a new token) and its
 * first write happen on the primary only, then restarts it; `PRIMARY_ONLY_ELECTIONS` times. Each
 * wait is counted in TTLs (a loaded machine elects more slowly); an election or a write that did not
 * come in time is said in the history ('precondition missed'), so that a run the variant could not
 * bite is judged inconclusive, not clean and not toothless.
 */
export async function electOnPrimaryOnly(ctx: FaultContext): Promise<void> {
  const waitMs = ctx.ttlMs * 8;
  for (let i = 0; i < PRIMARY_ONLY_ELECTIONS; i++) {
    const leader = await ctx.waitForLeader(waitMs);
    if (leader === undefined) return missed(ctx, `no leader within ${waitMs} ms for primary-only election ${i + 1} of ${PRIMARY_ONLY_ELECTIONS}`);
    ctx.fault('crash', 'start', leader.name, 'leader, so that an election happens on the primary only');
    await ctx.kill(leader);
    const next = await ctx.waitForLine(isElected, waitMs);
    const wrote = next === undefined ? undefined : await ctx.waitForLine(isWrite('committed', next), Math.max(3000, ctx.ttlMs * 3));
    ctx.restart(leader);
    ctx.fault('crash', 'end', leader.name);
    if (next === undefined) return missed(ctx, `no election within ${waitMs} ms after the leader was killed (primary-only election ${i + 1})`);
    if (wrote === undefined) missed(ctx, `no committed write by ${next} on the primary only (election ${i + 1})`);
  }
}
