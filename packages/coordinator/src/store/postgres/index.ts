// `@fenced/coordinator/postgres`: leases on PostgreSQL. A subpath of its own, so that a Redis-only
// deployment never loads anything of it.
export { postgresLeases, type PostgresLeases, type PostgresLeasesOptions } from './postgres-backend.js';
export type { PgLeasePool, PgLeaseClient } from './pg-pool.js';
export { LATEST_LEASE_MIGRATION } from './lease-migrator.js';
export { leaseObjectNames, type LeaseObjectNames } from './lease-names.js';
export { postgresClock } from './postgres-clock.js';
