export { LATEST_MIGRATION } from './migrator.js';
export { DEFAULT_TAKEOVER } from './postgres-guard-options.js';
export type { AuditEntry, FenceReport, GuardInspection } from './inspection.js';
export {
  createPostgresGuard,
  type PostgresGuard,
  type GuardedWriteContext,
  type GuardedWriteOptions,
  type LowerFenceRequest,
  type AppliedFire,
  type TokenInput,
  type FenceGuard,
} from './postgres-guard.js';
export type { PgClientLike, PgPoolEvents, PgPoolLike, PoolClientOf } from './pg-pool-session.js';
export type { IsolationLevel } from './session.js';
export type { KyselyLike, KyselyTransactionOf } from '../sql/kysely-like.js';
export { postgresFences } from './postgres-fences.js';
