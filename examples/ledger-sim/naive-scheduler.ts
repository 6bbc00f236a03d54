/**
 * The control: how a team would schedule on a lease without fenced's other protections. Due times
 * come from this process's own wall clock, the last fire is kept with a plain HSET (no lease check),
 * and the handler writes without a fence or a dedupe. Everything else (the lease itself) is the same.
 */
import type { Redis } from 'ioredis';

export interface NaiveSchedulerOptions {
  readonly redis: Redis;
  readonly stateKey: string;
  readonly job: string;
  readonly everyMs: number;
  readonly catchUpWindowMs: number;
  readonly isLeader: () => boolean;
  readonly token: () => bigint | null;
  readonly fireId: (job: string, scheduledAt: number) => string;
  readonly dispatch: (fire: { fireId: string; scheduledAt: number; token: bigint }) => Promise<void>;
}

export function startNaiveScheduler(options: NaiveSchedulerOptions): () => void {
  let busy = false;
  const tick = async () => {
    if (busy || !options.isLeader()) return;
    busy = true;
    try {
      const now = Date.now(); // the replica's own clock: wrong when it is skewed or slow
      const recorded = await options.redis.hget(options.stateKey, options.job);
      if (recorded === null) {
        // First run (or lost state): start from the current slot.
        await options.redis.hset(options.stateKey, options.job, String(Math.floor(now / options.everyMs) * options.everyMs));
        return;
      }
      let at = Number(recorded) + options.everyMs;
      at = Math.max(at, Math.ceil((now - options.catchUpWindowMs) / options.everyMs) * options.everyMs);
      for (; at <= now; at += options.everyMs) {
        const token = options.token();
        if (token === null || !options.isLeader()) return;
        await options.dispatch({ fireId: options.fireId(options.job, at), scheduledAt: at, token });
        await options.redis.hset(options.stateKey, options.job, String(at));
      }
    } catch {
      // Redis or PostgreSQL trouble: try again on the next tick.
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void tick(), 10);
  return () => clearInterval(timer);
}
