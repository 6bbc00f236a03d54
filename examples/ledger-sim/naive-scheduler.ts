/**
 * The control: how a team would schedule on a lease without fenced's other protections. The last
 * fire is kept with a plain HSET (no lease check) and the handler writes without a fence or a
 * dedupe. Due times come from the Redis server's clock, or (`clock: 'local'`, for the wall-clock
 * scenario, whose protection is the single clock) from this process's own wall clock.
 */
import type { Cluster, Redis } from 'ioredis';
import { failpoints } from '@fenced/shared/failpoints';

export interface NaiveSchedulerOptions {
  readonly redis: Redis | Cluster;
  readonly stateKey: string;
  readonly job: string;
  readonly everyMs: number;
  readonly catchUpWindowMs: number;
  readonly clock: 'server' | 'local';
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
      const now = options.clock === 'local' ? Date.now() : await serverNow(options.redis);
      const recorded = await options.redis.hget(options.stateKey, options.job);
      if (recorded === null) {
        // First run (or lost state): start from the current slot.
        await options.redis.hset(options.stateKey, options.job, String(Math.floor(now / options.everyMs) * options.everyMs));
        return;
      }
      let at = Number(recorded) + options.everyMs;
      at = Math.max(at, Math.ceil((now - options.catchUpWindowMs) / options.everyMs) * options.everyMs);
      // Leadership checked once per tick, as it usually is: a batch, once begun, goes out whole.
      const token = options.token();
      if (token === null || !options.isLeader()) return;
      for (let n = 0; at <= now; at += options.everyMs, n++) {
        // Where the guarded scheduler's failpoint stands: a catch-up batch begun, the rest to go.
        if (n > 0 && failpoints.armed) await failpoints.hit('scheduler.mid-catch-up');
        // The team's scheduler before fenced: a handler that fails is not dispatched again (fenced's
        // scheduler retries it until it takes effect), and the fire is recorded as dispatched either way.
        await options.dispatch({ fireId: options.fireId(options.job, at), scheduledAt: at, token }).catch(() => undefined);
        // Where the scheduler's own failpoint stands in the guarded run: dispatched, not yet recorded.
        if (failpoints.armed) await failpoints.hit('scheduler.dispatched-before-record');
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

async function serverNow(redis: Redis | Cluster): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}
