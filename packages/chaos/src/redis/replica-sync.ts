import { redisCommand } from './redis-command.js';

/** The server's `INFO replication` text; empty when it did not answer. */
async function replicationInfo(port: number): Promise<string> {
  return String(await redisCommand(port, ['INFO', 'replication'], 1000).catch(() => ''));
}

/** Whether `INFO replication` text shows a replica whose link to its primary is up. */
const linkUp = (info: string): boolean => /master_link_status:up/.test(info);

/** Whether the server on `port` is a replica whose link to its primary is up (no answer: not yet). */
export async function replicaInSync(port: number): Promise<boolean> {
  // `master_link_status` is reported by replicas only.
  return linkUp(await replicationInfo(port));
}

/**
 * Resolves once the server on `port` replicates in sync; throws after `timeoutMs`, saying what the
 * server last said of its replication (its role, the primary it follows, its link's state and since
 * when it has been down): a run kept for that failure can then tell a replica that follows the wrong
 * primary, or one refused by it, from a server that did not answer at all.
 */
export async function waitForReplicaSync(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const info = await replicationInfo(port);
    if (linkUp(info)) return;
    if (Date.now() > deadline) throw new Error(`the Redis server on ${port} did not sync with its primary within ${timeoutMs} ms (${replicationSummary(info)})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The fields of `INFO replication` that say why a replica is not in sync, on one line. */
function replicationSummary(info: string): string {
  if (info === '') return 'it did not answer INFO replication';
  const fields = ['role', 'master_host', 'master_port', 'master_link_status', 'master_sync_in_progress', 'master_link_down_since_seconds', 'connected_slaves'];
  const found = fields.flatMap((field) => {
    const match = new RegExp(`^${field}:(.*)$`, 'm').exec(info);
    return match === null ? [] : [`${field}:${match[1]!.trim()}`];
  });
  return found.length === 0 ? 'no replication fields in its INFO' : found.join(' ');
}
