// `@fenced/consumer-guard/mysql`: fences in MySQL 8 or MariaDB 10.6+ (InnoDB), over mysql2's promise
// pool or Kysely's MysqlDialect. Nothing here imports a driver: the caller's own pool is used.
export { mysqlFences, createMysqlGuard, type MysqlGuard } from './mysql-fences.js';
export { LATEST_MYSQL_MIGRATION } from './migrator.js';
export { DEFAULT_MYSQL_TAKEOVER } from './mysql-store-options.js';
export type { Mysql2ConnectionOf, Mysql2PoolLike, Mysql2PoolConnectionLike } from './mysql2-session.js';
export type { FenceGuard, FenceGuardIn } from '../fence-guard.js';
export type { AppliedFire, AppliedOutcome, AuditEntry, FenceReport, GuardInspection, LowerFenceRequest } from '../fence-records.js';
export type { GuardedWriteContext, GuardedWriteOptions, TransactionExecutor } from '../write-context.js';
