import type { FencedLogger } from '@fenced/shared';
import { parseOptions } from '@fenced/shared/internal';
import type { MeterProvider } from '@opentelemetry/api';
import { fenceGuardInOver, type FenceGuardIn } from '../fence-guard.js';
import type { FenceStoreContext, FenceStoreFactory } from '../fence-store.js';
import { GuardMetrics } from '../metrics/guard-metrics.js';
import type { KyselyLike, KyselyTransactionOf } from '../sql/kysely-like.js';
import { mysqlFenceStore } from './mysql-store.js';
import { mysqlGuardOptionsSchema, mysqlStoreOptionsSchema, type MysqlGuardOptionsInput, type MysqlStoreOptionsInput } from './mysql-store-options.js';
import type { Mysql2ConnectionOf, Mysql2PoolLike } from './mysql2-session.js';

type MysqlFencesOptions<Db> = Omit<MysqlStoreOptionsInput, 'db' | 'pool'> & { db: Db; pool?: object };

/**
 * The MySQL/MariaDB fence store for `createGuard({ store })`: options validated now, the store opened
 * by the guard that takes it.
 *
 * @throws {ConfigError} for bad options (names the option).
 * @example
 * ```ts
 * import mysql from 'mysql2/promise';
 * const pool = mysql.createPool({ uri: process.env.MYSQL_URL });
 * const guard = createGuard({ store: mysqlFences({ db: pool }), resource: 'billing', redis });
 * await guard.migrate();
 * await guard.guardedWrite(token, (conn) => conn.query('INSERT INTO invoices SET ?', [row]));
 * ```
 */
export function mysqlFences<Db extends KyselyLike>(options: MysqlFencesOptions<Db> & { pool: object }): FenceStoreFactory<KyselyTransactionOf<Db>>;
export function mysqlFences<Pool extends Mysql2PoolLike>(options: MysqlFencesOptions<Pool>): FenceStoreFactory<Mysql2ConnectionOf<Pool>>;
export function mysqlFences(input: MysqlFencesOptions<object>): FenceStoreFactory<unknown> {
  const options = parseOptions('mysql fences', mysqlStoreOptionsSchema, input);
  return Object.freeze({ kind: 'mysql' as const, open: (context: FenceStoreContext) => mysqlFenceStore(options, context) });
}

/**
 * The MySQL/MariaDB guard: the same promise as the PostgreSQL guard; `guardedWriteIn` joins a
 * transaction the caller holds (a mysql2 connection after `beginTransaction()`, a Kysely transaction).
 */
export type MysqlGuard<Trx> = FenceGuardIn<Trx>;

type MysqlGuardOptions<Db> = Omit<MysqlGuardOptionsInput, 'db' | 'pool' | 'logger' | 'meterProvider'> & { db: Db; pool?: object; logger?: FencedLogger; meterProvider?: MeterProvider };

/**
 * Creates a guard on MySQL or MariaDB alone (no fast path): the same promise as the PostgreSQL guard.
 *
 * @example
 * ```ts
 * const guard = createMysqlGuard({ db: pool, resource: 'billing' });
 * await guard.migrate();
 * await guard.guardedWrite(token, (conn) => conn.query('UPDATE accounts SET balance = balance - ? WHERE id = ?', [amount, id]));
 * ```
 */
export function createMysqlGuard<Db extends KyselyLike>(options: MysqlGuardOptions<Db> & { pool: object }): MysqlGuard<KyselyTransactionOf<Db>>;
export function createMysqlGuard<Pool extends Mysql2PoolLike>(options: MysqlGuardOptions<Pool>): MysqlGuard<Mysql2ConnectionOf<Pool>>;
export function createMysqlGuard(input: MysqlGuardOptions<object>): MysqlGuard<unknown> {
  const options = parseOptions('mysql guard', mysqlGuardOptionsSchema, input);
  const metrics = new GuardMetrics({ meterProvider: options.meterProvider as MeterProvider | undefined, resourceAttribute: options.metricResourceAttribute, resource: options.resource, authority: 'mysql' });
  return fenceGuardInOver(mysqlFenceStore(options, { resource: options.resource, logger: options.logger as FencedLogger | undefined, metrics }));
}
