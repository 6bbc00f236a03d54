import type { Cluster, Redis } from 'ioredis';
import type { IoRedisClient } from './ioredis-client.js';
import { withTimeout } from '@fenced/shared/internal';

/**
 * The problem with Redis's eviction policy, if any: an evicted lease or token counter is a silent
 * split brain. Null when the policy is safe, or when CONFIG is renamed or forbidden (managed Redis).
 */
export async function evictionProblem(redis: IoRedisClient, timeoutMs: number): Promise<string | null> {
  // On a Cluster every primary holds some leases, so every primary is asked.
  const servers = redis.isCluster ? (redis as Cluster).nodes('master') : [redis as Redis];
  const problems = await Promise.all(servers.map((server) => serverProblem(server, timeoutMs)));
  return problems.find((p) => p !== null) ?? null;
}

async function serverProblem(server: Redis, timeoutMs: number): Promise<string | null> {
  try {
    const reply = (await withTimeout(server.config('GET', 'maxmemory-policy'), timeoutMs, 'config')) as string[];
    const policy = reply[1];
    if (policy !== undefined && policy !== 'noeviction' && !policy.startsWith('volatile')) {
      const where = server.options.host === undefined ? '' : ` on ${server.options.host}:${server.options.port}`;
      return `maxmemory-policy is ${policy}${where}: Redis may evict the token counter (set noeviction)`;
    }
  } catch {
    // Nothing to report.
  }
  return null;
}
