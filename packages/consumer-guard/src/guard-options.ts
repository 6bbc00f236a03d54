import { z } from 'zod';
import { keyPrefixSchema, redisClientSchema } from '@fenced/shared/internal';
import { DEFAULT_MAX_PAYLOAD_BYTES } from '@fenced/shared';
import { fenceGuardOptionsSchema } from './fence-guard-options.js';
import { isFenceStoreFactory, type FenceStoreFactory } from './fence-store.js';

/** Options of `createGuard` beside its store (the fast path, the handler wrapper's), with their defaults. */
export const combinedOptionsShape = {
  /**
   * An ioredis client for the fast path (`Redis`, a Sentinel one with `failoverDetector: true`, or
   * `Cluster`). Without it the guard is PostgreSQL only.
   */
  redis: redisClientSchema.optional(),
  /**
   * Prefix of the fast path's Redis keys.
   * @defaultValue `'fenced'`
   */
  keyPrefix: keyPrefixSchema,
  /**
   * How long a Redis check may take before the guard goes on with PostgreSQL alone.
   * @defaultValue `250`
   */
  redisTimeoutMs: z.number().int().min(1).max(60_000).default(250),
  /**
   * Verification keys by key id. When given, handler wrappers refuse every envelope that is not
   * signed by one of them, before its token is even looked at.
   */
  keys: z
    .record(z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/), z.custom<string | Buffer>((v) => (typeof v === 'string' || Buffer.isBuffer(v)) && Buffer.byteLength(v) >= 32, { message: 'must be a secret of at least 32 bytes' }))
    .refine((k) => Object.keys(k).length > 0, 'give at least one key, or leave keys out')
    .optional(),
  /**
   * The largest envelope payload handler wrappers accept, in bytes of JSON.
   * @defaultValue `262144` (256 KiB)
   */
  maxPayloadBytes: z.number().int().min(0).max(64 * 1024 * 1024).default(DEFAULT_MAX_PAYLOAD_BYTES),
  /**
   * How long applied-fire records are kept by `pruneAppliedFires()`. A fire dispatched again after
   * its record was pruned would apply again, so keep this well above the longest redelivery
   * (queue retries, the scheduler's catch-up window).
   * @defaultValue `604800000` (7 days)
   */
  appliedFireRetentionMs: z.number().int().min(60_000).default(7 * 86_400_000),
};

/** Options of the combined guard, whatever store it runs over (what it reads of them once parsed). */
const combinedGuardOptionsSchema = fenceGuardOptionsSchema.extend(combinedOptionsShape);

/** Options of `createGuard` over a store from its factory (`store: mysqlFences({ db: pool })`). */
export const storeGuardOptionsSchema = combinedGuardOptionsSchema.extend({
  /** The fence store: `postgresFences(...)` from `@fenced/consumer-guard/postgres`, `mysqlFences(...)` from `/mysql`. */
  store: z.custom<FenceStoreFactory<unknown>>(isFenceStoreFactory, { message: 'must be a fence store, such as mysqlFences({ db: pool }) or postgresFences({ db })' }),
});

export type StoreGuardOptionsInput = z.input<typeof storeGuardOptionsSchema>;
/** Options of `createGuard` once parsed, defaults filled in (what the combined guard reads of them). */
export type GuardOptions = Readonly<z.output<typeof combinedGuardOptionsSchema>>;
