import type { DeploymentFaultKind } from './fault-kind.js';

/**
 * The run's PostgreSQL primary frozen (SIGSTOP, the whole server) while the leader stands at
 * `failpoint`; its streaming replica (asynchronous) promoted and the service address moved to it,
 * as a failover manager does; the old primary resumed after the hold, still a primary in its own
 * eyes, with the replicas' pooled connections still open to it, for two TTLs; then shut down and
 * replaced by a new replica of the new primary (an operator's rebuild), so that the next round has
 * a replica to promote. Writes the replica had not received are lost with the old primary, as in a
 * real asynchronous failover.
 */
export type PostgresFailoverFault = {
  readonly kind: 'postgres-failover';
  /** Where the leader is when the freeze starts: the app's failpoint between a fire's write and its record. */
  readonly failpoint: string;
};

/** How long the failover manager takes to notice the frozen primary and promote its replica. */
const DETECTION_MS = 300;

export const postgresFailover: DeploymentFaultKind<'stores', PostgresFailoverFault> = {
  target: 'stores',
  async inject(ctx, fault, { holdMs }) {
    const cluster = ctx.postgresCluster(fault.kind);
    // One span from the aim to the rebuild: fires due in it are judged from its end. Until the deposed
    // primary is shut down, a replica whose pooled connection still reaches it fails closed there.
    ctx.fault('postgres failover', 'start', undefined, 'from the aim at the failpoint to the rebuild');
    const leader = await ctx.waitForLeader(5000);
    const stopped = leader !== undefined && (await ctx.stopAt(leader, fault.failpoint, ctx.ttlMs * 4));
    const deposed = cluster.primary();
    ctx.fault('primary frozen', 'start', undefined, `PostgreSQL primary :${deposed.port} (SIGSTOP, every backend)`, ['postgres']);
    deposed.pause();
    // The leader goes on: its record goes to the frozen primary.
    if (stopped) ctx.resume(leader);
    try {
      await ctx.sleep(DETECTION_MS);
      await cluster.failover();
      ctx.fault('failover', 'start', undefined, `replica :${cluster.primary().port} promoted, the service address moved to it`);
      ctx.fault('failover', 'end');
      await ctx.sleep(holdMs);
    } finally {
      deposed.resume();
    }
    ctx.fault('primary frozen', 'end', undefined, 'resumed, deposed: it still accepts writes on the connections open to it');
    ctx.fault('deposed primary', 'start', undefined, `:${deposed.port} answers on old connections`);
    await ctx.sleep(ctx.ttlMs * 2);
    ctx.fault('deposed primary', 'end', undefined, 'shut down; a new replica of the new primary takes its place');
    await cluster.rebuild(deposed);
    ctx.fault('postgres failover', 'end');
  },
};
