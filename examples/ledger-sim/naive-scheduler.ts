/**
 * The control: how a team would schedule on a lease without fenced's other protections. The last
 * fire is kept with a plain write (no lease check: an HSET in Redis, or an upsert in PostgreSQL on a
 * machine without Redis) and the handler writes without a fence or a dedupe. Due times come from
 * that server's clock, or (`clock: 'local'`, for the wall-clock scenario, whose protection is the
 * single clock) from this process's own wall clock.
 */
import type { Cluster, Redis } from 'ioredis';
import type pg from 'pg';
import { failpoints } from '@fenced/shared/failpoints';

/** Where the control keeps its last fire per job, and whose clock it reads. */
export interface ControlState {
  now(): Promise<number>;
  lastFired(job: string): Promise<number | null>;
  record(job: string, at: number): Promise<void>;
}

/** The state in a Redis hash, the time from the Redis server. */
export function redisControlState(redis: Redis | Cluster, stateKey: string): ControlState {
  return {
    async now() {
      const [seconds, micros] = await redis.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    },
    async lastFired(job) {
      const recorded = await redis.hget(stateKey, job);
      return recorded === null ? null : Number(recorded);
    },
    async record(job, at) {
      await redis.hset(stateKey, job, String(at));
    },
  };
}

/** The state in a table of the run's schema (created on first use), the time from the PostgreSQL server. */
export function postgresControlState(pool: pg.Pool): ControlState {
  let created: Promise<unknown> | undefined;
  const table = () => (created ??= pool.query('CREATE TABLE IF NOT EXISTS control_last_fired (job text PRIMARY KEY, at bigint NOT NULL)').catch((err: unknown) => {
    created = undefined;
    throw err;
  }));
  return {
    async now() {
      const { rows } = await pool.query<{ now: string }>(`SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS now`);
      return Number(rows[0]!.now);
    },
    async lastFired(job) {
      await table();
      const { rows } = await pool.query<{ at: string }>('SELECT at::text AS at FROM control_last_fired WHERE job = $1', [job]);
      return rows[0] === undefined ? null : Number(rows[0].at);
    },
    async record(job, at) {
      await table();
      await pool.query('INSERT INTO control_last_fired (job, at) VALUES ($1, $2) ON CONFLICT (job) DO UPDATE SET at = EXCLUDED.at', [job, at]);
    },
  };
}

export interface NaiveSchedulerOptions {
  readonly state: ControlState;
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
      const now = options.clock === 'local' ? Date.now() : await options.state.now();
      const recorded = await options.state.lastFired(options.job);
      if (recorded === null) {
        // First run (or lost state): start from the current slot.
        await options.state.record(options.job, Math.floor(now / options.everyMs) * options.everyMs);
        return;
      }
      let at = recorded + options.everyMs;
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
        await options.state.record(options.job, at);
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
