// `@fenced/shared/internal`: plumbing the fenced packages share, not part of the public API (it may
// change in any release). Nothing here is listed in the package READMEs.
export { defineScripts, SCRIPT_VERSION, type LuaScript, type ScriptCall, type ScriptHost } from './redis-scripts.js';
export { luaScripts as sharedLuaScripts } from '../lua/generated-lua.js';
export { parseOptions } from './parse-options.js';
export { withTimeout, TimeoutError } from './with-timeout.js';
export { emit } from '../events.js';
export { canonicalJson } from '../signing.js';
export { envelopeSchema, tokenStringSchema } from '../envelope.js';
export { toValidationIssues } from '../validation.js';
export { redisClientProblem, redisClientSchema } from './redis-client-check.js';
export { meterProviderSchema } from './meter-provider-check.js';
export { isFunction, isObject } from './type-guards.js';
export { storedToken } from '../token.js';
export { keyPrefixSchema } from './key-prefix.js';
export { MYSQL_LOCK_TABLES_IDLE_MS, mysqlSessionsBlocking } from './mysql-lock-waits.js';
export { MYSQL_NOW_US_SQL, mysqlRowsOf, withMysqlConnection, type MysqlCheckedOut, type MysqlPooledConnection } from './mysql-connection.js';
export { applyMysqlMigrations, mysqlScriptStatements, type MysqlMigrationConnection, type MysqlMigrationPlan } from './mysql-migrations.js';
export { applyMigrations, fillPlaceholders, numberedMigrations, type MigrationPlan, type MigrationStatement, type RunMigrationStatement } from './numbered-migrations.js';
export { quoteIdent, quoteLiteral } from './sql-text.js';
export { sqlIdentifierSchema } from './sql-identifier.js';
