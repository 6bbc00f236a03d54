import { z } from 'zod';

/**
 * What makes an ioredis client unfit for fenced, checked by every factory that takes one.
 *
 * A Sentinel client without `failoverDetector` learns of a failover only when its connection breaks.
 * A primary frozen by SIGSTOP (or a hung VM) keeps its connections open, so such a client stays on it
 * through the failover, and when the deposed primary resumes it takes commands again until Sentinel
 * turns it into a replica (measured here: about 10 s): leaders elected on a server whose writes are
 * about to be thrown away, and a token sequence that goes back. With `failoverDetector: true` the
 * client subscribes to the sentinels' `+switch-master` and moves to the new primary at once.
 *
 * @returns why the client is refused, or null.
 */
export function redisClientProblem(client: unknown): string | null {
  if (typeof client !== 'object' || client === null) return 'must be an ioredis client (Redis or Cluster)';
  const { defineCommand, duplicate } = client as { defineCommand?: unknown; duplicate?: unknown };
  if (typeof defineCommand !== 'function' || typeof duplicate !== 'function') return 'must be an ioredis client (Redis or Cluster)';
  const options = (client as { options?: { sentinels?: unknown; failoverDetector?: unknown } }).options;
  const usesSentinel = Array.isArray(options?.sentinels) && options.sentinels.length > 0;
  if (usesSentinel && options?.failoverDetector !== true) {
    return 'a Sentinel client must be created with failoverDetector: true (without it, it stays on a frozen primary that Sentinel has deposed)';
  }
  return null;
}

/** The option schema of a factory's `redis`: an ioredis client that `redisClientProblem` accepts. */
export const redisClientSchema = z.custom<object>().superRefine((value, ctx) => {
  const problem = redisClientProblem(value);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
});
