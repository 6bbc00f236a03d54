import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { z } from 'zod';
import { isFunction, isObject, meterProviderSchema, redisClientSchema, keyPrefixSchema } from '@fenced/shared/internal';
import type { LeaseBackend } from '../store/lease-backend.js';

/** A lease name: it becomes part of Redis keys, so only a safe set of characters. */
export const leaseNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 characters from A-Z a-z 0-9 _ . -');

/** This node's id when none is given: `<hostname>-<pid>-<random>`. */
export function defaultNodeId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

/** How long any single Redis command of a lease may take before it counts as failed: a third of the TTL. */
export function commandTimeoutMs(ttlMs: number): number {
  return Math.max(50, Math.floor(ttlMs / 3));
}

/** The smallest drift margin allowed for a TTL: 1% of it plus a few milliseconds. */
export function defaultDriftMs(ttlMs: number): number {
  return Math.ceil(ttlMs * 0.01) + 5;
}

/**
 * The timing and identity options of one lease, shared by `createCoordinator` and `createLeaseGroup`
 * (whose every lease runs with them), checked together by `checkLeaseTiming`.
 */
export const leaseTimingShape = {
  /**
   * Lease time to live.
   * @defaultValue `15000`
   */
  ttlMs: z.number().int().min(100).max(86_400_000).default(15_000),
  /**
   * How often the leader renews.
   * @defaultValue `5000`
   */
  renewIntervalMs: z.number().int().min(10).default(5_000),
  /**
   * Safety margin taken off the lease on this node's side, for clock rate differences between
   * this process and Redis. At least 1% of the TTL plus 2 ms.
   * @defaultValue `ceil(ttlMs * 1%) + 5`
   */
  driftMs: z.number().int().min(0).optional(),
  /**
   * This node's id in the lease value and in events.
   * @defaultValue `<hostname>-<pid>-<random>`
   */
  nodeId: z
    .string()
    .regex(/^[A-Za-z0-9_.:@-]{1,128}$/, 'must be 1-128 characters from A-Z a-z 0-9 _ . : @ -')
    .optional(),
  /**
   * Prefix of every Redis key of the lease, with `redis` (with `store`, give it to `redisLeases`).
   * @defaultValue `'fenced'`
   */
  keyPrefix: keyPrefixSchema.unwrap().optional(),
};

/** A lease store: what `redisLeases(redis)` and `postgresLeases({ pool })` return. */
export const leaseBackendSchema = z.custom<LeaseBackend>(
  (v) => isObject(v) && typeof (v as { kind?: unknown }).kind === 'string' && isFunction((v as { openLease?: unknown }).openLease),
  { message: 'must be a lease store: redisLeases(redis) or postgresLeases({ pool }) from @fenced/coordinator/postgres' },
);

/** Exactly one of `redis` and `store`; a key prefix only goes with `redis`. */
export function checkStoreChoice(o: { redis?: unknown; store?: unknown; keyPrefix?: string | undefined }, ctx: z.RefinementCtx): void {
  if ((o.redis === undefined) === (o.store === undefined)) {
    ctx.addIssue({ code: 'custom', path: ['store'], message: 'give exactly one of redis (an ioredis client) or store (redisLeases(...), postgresLeases(...))' });
  }
  if (o.store !== undefined && o.keyPrefix !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['keyPrefix'], message: 'goes with redis; with store, give it to redisLeases(redis, { keyPrefix })' });
  }
}

/** The lease timing must leave room for a renew: renew interval + drift margin below the TTL. */
export function checkLeaseTiming(o: { ttlMs: number; renewIntervalMs: number; driftMs?: number | undefined }, ctx: z.RefinementCtx): void {
  if (o.renewIntervalMs >= o.ttlMs) {
    ctx.addIssue({ code: 'custom', path: ['renewIntervalMs'], message: `must be less than ttlMs (${o.ttlMs})` });
  }
  const minDrift = Math.ceil(o.ttlMs * 0.01) + 2;
  if (o.driftMs !== undefined && o.driftMs < minDrift) {
    ctx.addIssue({ code: 'custom', path: ['driftMs'], message: `must be at least 1% of ttlMs plus 2 ms (${minDrift})` });
  }
  const drift = o.driftMs ?? defaultDriftMs(o.ttlMs);
  if (o.renewIntervalMs + drift >= o.ttlMs) {
    ctx.addIssue({
      code: 'custom',
      path: ['renewIntervalMs'],
      message: `renewIntervalMs + driftMs (${o.renewIntervalMs + drift}) must stay below ttlMs (${o.ttlMs}), or leadership lapses between renews`,
    });
  }
}

/** Options of `createCoordinator`, with their defaults. */
export const coordinatorOptionsSchema = z
  .object({
    /**
     * An ioredis client: `Redis`, a Sentinel `Redis` created with `failoverDetector: true` (refused
     * without it), or `Cluster`. The coordinator duplicates it once for its pub/sub wake-ups. Short
     * for `store: redisLeases(redis, { keyPrefix })`. Give this or `store`.
     */
    redis: redisClientSchema.optional(),
    /**
     * The store the lease lives in: `redisLeases(redis)`, or `postgresLeases({ pool })` from
     * `@fenced/coordinator/postgres` (no Redis at all). Give this or `redis`.
     */
    store: leaseBackendSchema.optional(),
    /** The lease's name: replicas with the same lease elect one leader among them. */
    lease: leaseNameSchema,
    ...leaseTimingShape,
    /**
     * Fences advanced to every newly minted token before the leader dispatches anything.
     * @defaultValue `[]`
     */
    fences: z
      .array(
        z.custom<object>(
          (v) => isObject(v) && isFunction((v as { advance?: unknown }).advance) && isFunction((v as { highest?: unknown }).highest),
          { message: 'must implement the Fence interface (highest(), advance(token))' },
        ),
      )
      .default([]),
    /**
     * How often a standby retries while the lease is held (it is also woken at once when the leader
     * releases).
     * @defaultValue `renewIntervalMs`
     */
    acquireRetryMs: z.number().int().min(10).optional(),
    /** Monotonic clock in milliseconds (a seam for fault injection). @defaultValue `performance.now` */
    clock: z.custom<{ now(): number }>((v) => isObject(v) && isFunction((v as { now?: unknown }).now), { message: 'must have now()' }).optional(),
    /** Receives structured events; the coordinator never logs to the console. */
    logger: z.custom<(event: never) => void>(isFunction, { message: 'must be a function' }).optional(),
    /**
     * The OpenTelemetry meter provider the lease's instruments come from (docs/operating.md, "Metrics").
     * @defaultValue the global provider of `@opentelemetry/api` when the coordinator is created
     */
    meterProvider: meterProviderSchema.optional(),
  })
  .superRefine((o, ctx) => {
    checkLeaseTiming(o, ctx);
    checkStoreChoice(o, ctx);
  });

export type CoordinatorOptionsInput = z.input<typeof coordinatorOptionsSchema>;
export type CoordinatorOptions = z.output<typeof coordinatorOptionsSchema>;
