import { redisCommand } from './redis-command.js';

/**
 * Lossy replication on demand, for topologies whose replicas connect straight to their primary
 * (Cluster, Sentinel): the replica is given a wrong `masterauth` and its link is killed, so it cannot
 * sync again and every later write on the primary is missing from it. Asynchronous replication losing
 * acknowledged writes, made certain instead of unlikely. The replica still counts as a failover
 * candidate for a while (Cluster: `cluster-replica-validity-factor`; Sentinel: its down-after window),
 * so the next failover promotes it without those writes.
 */
export async function breakReplication(primaryPort: number, replicaPort: number): Promise<void> {
  await redisCommand(replicaPort, ['CONFIG', 'SET', 'masterauth', 'fenced-chaos-wrong-password']);
  await redisCommand(primaryPort, ['CLIENT', 'KILL', 'TYPE', 'replica']);
}

/** Lets the replica sync again. */
export async function restoreReplication(replicaPort: number): Promise<void> {
  await redisCommand(replicaPort, ['CONFIG', 'SET', 'masterauth', '']);
}
