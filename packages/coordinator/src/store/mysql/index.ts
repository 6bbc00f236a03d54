// `@fenced/coordinator/mysql`: leases on MySQL/MariaDB. A subpath of its own, so that a deployment on
// another store never loads anything of it.
export { mysqlLeases, type MysqlLeases, type MysqlLeasesOptions } from './mysql-backend.js';
export type { MysqlLeasePool, MysqlLeaseConnection } from './mysql-pool.js';
export { LATEST_MYSQL_LEASE_MIGRATION } from './mysql-lease-migrator.js';
export { mysqlLeaseObjectNames, type MysqlLeaseObjectNames } from './mysql-lease-names.js';
