import { z } from 'zod';
import { isFunction } from '@fenced/shared/internal';

const isEtcdClient = (value: unknown): boolean =>
  typeof value === 'object' && value !== null && 'kv' in value && 'leaseClient' in value && 'watch' in value && typeof (value as { watch: unknown }).watch === 'function';

/** Options of `etcdLeases`, with their defaults. */
export const etcdLeasesOptionsSchema = z.object({
  /**
   * An `Etcd3` client (npm `etcd3`), configured with the cluster's endpoints, TLS and credentials.
   * The caller owns it: `close()` it after the coordinators stopped.
   */
  client: z.custom<object>(isEtcdClient, { message: 'must be an Etcd3 client (npm etcd3)' }),
  /**
   * The key prefix everything of fenced lives under (see etcd-keys.ts): one per installation.
   * @defaultValue `'fenced/'`
   */
  prefix: z
    .string()
    .min(1)
    .max(200)
    .regex(/^[\x21-\x7e]*\/$/, 'printable ASCII without spaces, ending in "/"')
    .default('fenced/'),
  /**
   * Where the scheduler's due times come from (etcd has no clock to read): `'local'`, or
   * `{ read }` returning another server's clock in epoch ms (`postgresClock(pool)`: the fence
   * database's). See etcd-clock.ts.
   * @defaultValue `'local'`
   */
  clock: z.union([z.literal('local'), z.object({ read: z.custom<(timeoutMs: number) => Promise<number>>(isFunction, { message: 'must be a function' }) })]).default('local'),
});

export type EtcdLeasesOptionsInput = z.input<typeof etcdLeasesOptionsSchema>;
