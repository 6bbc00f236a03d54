import { ConfigError } from '@fenced/shared';
import type { LeaseBackend } from '../store/lease-backend.js';

/**
 * The store a state machine runs on. The coordinator and the lease group take a store and name none
 * (as kysely's `Kysely` has no default dialect): `createCoordinator({ redis })` and
 * `createLeaseGroup({ redis })` make the Redis one at the package's entry (create.ts). Called once
 * the options have parsed, so `store` is missing only when a class was given `redis` itself.
 */
export function givenStore(component: string, store: LeaseBackend | undefined): LeaseBackend {
  if (store !== undefined) return store;
  throw new ConfigError(component, [
    { path: 'store', message: 'the class takes a store (redisLeases(redis), postgresLeases({ pool }), ...); the create function also takes redis' },
  ]);
}
