import { checkLeaseSchema } from '../sql/check-lease.js';
import { z } from 'zod';
import { isFunction, isObject, sqlIdentifierSchema } from '@fenced/shared/internal';
import { fenceGuardOptionsSchema } from '../fence-guard-options.js';

/** The `takeover` option's default, as on PostgreSQL. */
export const DEFAULT_MYSQL_TAKEOVER = Object.freeze({ graceMs: 250, timeoutMs: 10_000 });

/** The MySQL/MariaDB fence store's own options (`mysqlFences`), with their defaults. */
export const mysqlStoreOptionsShape = {
  /**
   * A mysql2 promise pool (`mysql2/promise`'s `createPool`), or a `Kysely<DB>` over kysely's
   * `MysqlDialect` (then `pool` is the mysql2 pool given to the dialect). `fn` receives a pooled
   * connection checked out for the write, or a Kysely transaction.
   */
  db: z.custom<object>(isObject, { message: 'must be a mysql2 promise pool or a Kysely instance over MysqlDialect' }),
  /**
   * The mysql2 pool behind `db`'s MysqlDialect: required when `db` is a Kysely instance, so that the
   * store hears every connection's errors (a killed session, a server restart) for the whole life of
   * the connection; an error nobody hears would kill the process. Not needed when `db` is the pool.
   */
  pool: z.custom<object>((v) => isObject(v) && isFunction((v as { on?: unknown }).on), { message: 'must be the mysql2 pool behind db (an EventEmitter with on())' }).optional(),
  /**
   * The database holding the store's tables and procedures.
   * @defaultValue the connection's current database
   */
  database: sqlIdentifierSchema.optional(),
  /**
   * Name of the fence table; the others are named `<table>_applied`, `<table>_audit`,
   * `<table>_migrations`, and the procedures `<table>_check` and `<table>_advance`.
   * @defaultValue `'fenced_fences'`
   */
  table: sqlIdentifierSchema.default('fenced_fences'),
  /**
   * Isolation level of the transactions `guardedWrite` opens. Unset, they run at the session's
   * default (InnoDB's is `REPEATABLE READ`) and the write costs no extra statement. The check reads
   * the fence with a locking read at every level, so it sees the latest committed fence even under
   * `REPEATABLE READ`; plain reads in `fn` see the transaction's snapshot, as usual.
   * @defaultValue the session's default
   */
  isolationLevel: z.enum(['read committed', 'repeatable read', 'serializable']).optional(),
  /**
   * How often a transaction the database aborted (deadlock 1213, lock wait timeout 1205) is run
   * again before the error reaches the caller. `fn` runs once per attempt.
   * @defaultValue `5`
   */
  maxRetries: z.number().int().min(0).max(100).default(5),
  /**
   * What an election's advance does when a guarded write of a lower token holds the fence row (a
   * deposed leader frozen inside its transaction): after `graceMs` it ends that write's session
   * (`KILL CONNECTION`, which needs `CONNECTION ADMIN` or `SUPER`, or the same user), again every
   * `graceMs`, and gives up after `timeoutMs` (then the election fails closed and is tried again).
   * The token of a blocking write is read from the fence row it holds (a dirty read: the fence its
   * transaction raised, or the committed one), so a write of the same or a higher token is never
   * ended. `false`: wait as long as the lock is held (or `innodb_lock_wait_timeout` allows).
   * @defaultValue `{ graceMs: 250, timeoutMs: 10000 }`
   */
  takeover: z
    .union([
      z.literal(false),
      z.object({
        graceMs: z.number().int().min(0).max(60_000).default(DEFAULT_MYSQL_TAKEOVER.graceMs),
        timeoutMs: z.number().int().min(1000).max(600_000).default(DEFAULT_MYSQL_TAKEOVER.timeoutMs),
      }),
    ])
    .default(DEFAULT_MYSQL_TAKEOVER),
  /**
   * Checks, in each write's own transaction, that the write's token still holds its lease in the
   * MySQL lease store beside the fences (`mysqlLeases` of `@fenced/coordinator/mysql`, same database
   * and table): a deposed leader's write is then refused (`NOT_LEADER`) even before the next leader
   * has written anything, and no new term begins while a write of the old one is still open (the
   * grant ends such writes of a frozen leader after its grace period). The lease of each write: a
   * name, or a function of the write's resource. A write that names its token's `issuer` must also
   * find that very node holding the lease.
   * @defaultValue off
   */
  checkLease: checkLeaseSchema,
};

export const mysqlStoreOptionsSchema = z.object(mysqlStoreOptionsShape);
/** Options of `createMysqlGuard`, with their defaults. */
export const mysqlGuardOptionsSchema = fenceGuardOptionsSchema.extend(mysqlStoreOptionsShape);

export type MysqlStoreOptionsInput = z.input<typeof mysqlStoreOptionsSchema>;
export type MysqlStoreOptions = z.output<typeof mysqlStoreOptionsSchema>;
export type MysqlGuardOptionsInput = z.input<typeof mysqlGuardOptionsSchema>;
