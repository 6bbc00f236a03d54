import { z } from 'zod';
import { redisClientSchema } from '@fenced/shared/internal';
import { leaseNameSchema } from '../lease/coordinator-options.js';

const isFunction = (v: unknown): v is (...args: never[]) => unknown => typeof v === 'function';

/** Options of `createLeaseGroup`, with their defaults (the lease timing ones are the coordinator's). */
export const leaseGroupOptionsSchema = z
  .object({
    /** An ioredis client (`Redis`, Sentinel with `failoverDetector: true`, or `Cluster`), shared by every lease. */
    redis: redisClientSchema,
    /** The group: processes with the same group share its leases out among them. */
    group: leaseNameSchema,
    /** The leases, by name. Give `leases` or `shards`. */
    leases: z.array(leaseNameSchema).min(1).max(100_000).optional(),
    /** `shards: N` names the leases `<group>-0` … `<group>-<N-1>`. */
    shards: z.number().int().min(1).max(100_000).optional(),
    /** @defaultValue `15000` */
    ttlMs: z.number().int().min(100).max(86_400_000).default(15_000),
    /** How often leaders renew and members send a heartbeat. @defaultValue `5000` */
    renewIntervalMs: z.number().int().min(10).default(5_000),
    driftMs: z.number().int().min(0).optional(),
    /** @defaultValue `<hostname>-<pid>-<random>` */
    nodeId: z.string().regex(/^[A-Za-z0-9_.:@-]{1,128}$/, 'must be 1-128 characters from A-Z a-z 0-9 _ . : @ -').optional(),
    /** @defaultValue `'fenced'` */
    keyPrefix: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 characters from A-Z a-z 0-9 _ . -').default('fenced'),
    /** The fences of each lease, advanced at each of its elections. @defaultValue none */
    fences: z.custom<(lease: string) => unknown>(isFunction, { message: 'must be a function (lease) => Fence[]' }).optional(),
    logger: z.custom<(event: never) => void>(isFunction, { message: 'must be a function' }).optional(),
  })
  .superRefine((o, ctx) => {
    if ((o.leases === undefined) === (o.shards === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['leases'], message: 'give either leases or shards' });
    }
    if (o.leases !== undefined && new Set(o.leases).size !== o.leases.length) {
      ctx.addIssue({ code: 'custom', path: ['leases'], message: 'lease names must be unique' });
    }
    if (o.renewIntervalMs >= o.ttlMs) {
      ctx.addIssue({ code: 'custom', path: ['renewIntervalMs'], message: `must be less than ttlMs (${o.ttlMs})` });
    }
  });

export type LeaseGroupOptionsInput = z.input<typeof leaseGroupOptionsSchema>;
