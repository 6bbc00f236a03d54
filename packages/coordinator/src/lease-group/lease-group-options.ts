import { z } from 'zod';
import { isFunction, meterProviderSchema, redisClientSchema } from '@fenced/shared/internal';
import { checkLeaseTiming, checkStoreChoice, leaseBackendSchema, leaseNameSchema, leaseTimingShape } from '../lease/coordinator-options.js';

/** Options of `createLeaseGroup`, with their defaults (the lease timing ones are the coordinator's, checked the same way). */
export const leaseGroupOptionsSchema = z
  .object({
    /** An ioredis client (`Redis`, Sentinel with `failoverDetector: true`, or `Cluster`), shared by every lease. Give this or `store`. */
    redis: redisClientSchema.optional(),
    /** The store of every lease and of the member list. Give this or `redis`. */
    store: leaseBackendSchema.optional(),
    /** The group: processes with the same group share its leases out among them. */
    group: leaseNameSchema,
    /** The leases, by name. Give `leases` or `shards`. */
    leases: z.array(leaseNameSchema).min(1).max(100_000).optional(),
    /** `shards: N` names the leases `<group>-0` … `<group>-<N-1>`. */
    shards: z.number().int().min(1).max(100_000).optional(),
    ...leaseTimingShape,
    /** The fences of each lease, advanced at each of its elections. @defaultValue none */
    fences: z.custom<(lease: string) => unknown>(isFunction, { message: 'must be a function (lease) => Fence[]' }).optional(),
    logger: z.custom<(event: never) => void>(isFunction, { message: 'must be a function' }).optional(),
    meterProvider: meterProviderSchema.optional(),
  })
  .superRefine((o, ctx) => {
    if ((o.leases === undefined) === (o.shards === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['leases'], message: 'give either leases or shards' });
    }
    if (o.leases !== undefined && new Set(o.leases).size !== o.leases.length) {
      ctx.addIssue({ code: 'custom', path: ['leases'], message: 'lease names must be unique' });
    }
    checkLeaseTiming(o, ctx);
    checkStoreChoice(o, ctx);
  });

export type LeaseGroupOptionsInput = z.input<typeof leaseGroupOptionsSchema>;
