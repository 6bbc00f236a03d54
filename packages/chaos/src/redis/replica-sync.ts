import { redisCommand } from './redis-command.js';

/** Whether the server on `port` is a replica whose link to its primary is up (no answer: not yet). */
export async function replicaInSync(port: number): Promise<boolean> {
  // `master_link_status` is reported by replicas only.
  return /master_link_status:up/.test(String(await redisCommand(port, ['INFO', 'replication'], 1000).catch(() => '')));
}

/** Resolves once the server on `port` replicates in sync; throws after `timeoutMs`. */
export async function waitForReplicaSync(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await replicaInSync(port))) {
    if (Date.now() > deadline) throw new Error(`the Redis server on ${port} did not sync with its primary within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
