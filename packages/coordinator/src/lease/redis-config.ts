import type { Redis } from 'ioredis';
import { withTimeout } from '@fenced/shared/internal';

/**
 * The problem with Redis's eviction policy, if any: an evicted lease or token counter is a silent
 * split brain. Null when the policy is safe, or when CONFIG is renamed or forbidden (managed Redis).
 */
export async function evictionProblem(redis: Redis, timeoutMs: number): Promise<string | null> {
  try {
    const reply = (await withTimeout(redis.config('GET', 'maxmemory-policy'), timeoutMs, 'config')) as string[];
    const policy = reply[1];
    if (policy !== undefined && policy !== 'noeviction' && !policy.startsWith('volatile')) {
      return `maxmemory-policy is ${policy}: Redis may evict the token counter (set noeviction)`;
    }
  } catch {
    // Nothing to report.
  }
  return null;
}
