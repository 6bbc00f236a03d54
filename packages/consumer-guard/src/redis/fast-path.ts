import { isFencedError, type FencedLogger, type Token } from '@fenced/shared';
import { emit, withTimeout } from '@fenced/shared/internal';
import { BoundedMap } from '../internal/bounded-map.js';
import { redisMarkWith, type RedisMark, type RefusedVia } from './redis-guard.js';
import type { FastPath } from '../fast-path.js';
import type { GuardMetrics } from '../metrics/guard-metrics.js';
import type { RedisClient } from './redis-client.js';

/**
 * The combined guard's Redis side, with its state in one place: a Redis guard per resource, the mark
 * Redis last reported per resource, and whether Redis is answering (degraded mode).
 *
 * Redis only ever speeds a refusal up. `check` throws StaleTokenError on a refusal, which is final;
 * an answer below the token, or no answer, leaves the decision to PostgreSQL.
 */
export interface RedisFastPathOptions {
  readonly redis: RedisClient;
  readonly keyPrefix: string;
  /** How long a Redis call may take before PostgreSQL decides alone. */
  readonly timeoutMs: number;
  readonly logger: FencedLogger | undefined;
  /** Times each check (the combined guard's instruments). */
  readonly metrics: GuardMetrics;
}

export function createRedisFastPath(options: RedisFastPathOptions): FastPath {
  const { redis, keyPrefix, timeoutMs, logger, metrics } = options;
  const guards = new BoundedMap<string, RedisMark>(10_000);
  // The mark as Redis last reported it, per resource. Only ever used to skip raising a mark that is
  // already high enough (one round trip saved per write in steady state), so a stale entry costs a
  // round trip, never correctness.
  const knownMarks = new BoundedMap<string, Token>(10_000);
  let degraded = false;
  // The guards that recorded a refusal since the last flush (a guard the map above forgot may still
  // have one on its way).
  const recorded = new Set<RedisMark>();

  const guardFor = (resource: string): RedisMark => {
    let guard = guards.get(resource);
    if (guard === undefined) {
      guard = redisMarkWith({ redis, resource, keyPrefix }, logger, null);
      guards.set(resource, guard);
    }
    return guard;
  };
  /** Records a refusal in the resource's stream, remembering the guard for the next flush. */
  const recordIn = (resource: string, token: Token, highest: Token, via: RefusedVia, fireId?: string) => {
    const guard = guardFor(resource);
    recorded.add(guard);
    guard.recordRefusal(token, highest, via, fireId);
  };
  const failed = (resource: string, error: unknown) => {
    if (!degraded) emit(logger, { type: 'guard.degraded', resource, error });
    degraded = true;
  };
  const answered = (resource: string) => {
    if (degraded) emit(logger, { type: 'guard.recovered', resource });
    degraded = false;
  };

  return {
    async flush() {
      const flushing = [...recorded];
      recorded.clear();
      await Promise.all(flushing.map((g) => g.flush()));
    },
    recordRefusal(resource, token, highest, via, fireId) {
      recordIn(resource, token, highest, via, fireId);
    },
    async check(resource, token, fireId) {
      const startedAt = performance.now();
      try {
        const mark = await withTimeout(guardFor(resource).check(token), timeoutMs, 'redis check');
        metrics.check(startedAt, resource, 'redis');
        if (mark === null) knownMarks.delete(resource);
        else knownMarks.set(resource, mark);
        answered(resource);
        return true;
      } catch (err) {
        if (isFencedError(err, 'STALE_TOKEN')) {
          metrics.check(startedAt, resource, 'redis');
          recordIn(resource, token, err.highest, 'redis', fireId);
          answered(resource);
          throw err;
        }
        failed(resource, err);
        return false;
      }
    },
    async raise(resource, token) {
      const known = knownMarks.get(resource);
      if (known !== undefined && known >= token) return;
      try {
        knownMarks.set(resource, await withTimeout(guardFor(resource).raise(token), timeoutMs, 'redis raise'));
        answered(resource);
      } catch (err) {
        failed(resource, err);
      }
    },
    async reset(resource, token) {
      const guard = guardFor(resource);
      await guard.forgetMark();
      knownMarks.set(resource, await guard.raise(token));
    },
  };
}
