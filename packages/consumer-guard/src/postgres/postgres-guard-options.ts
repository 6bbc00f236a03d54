import { checkLeaseSchema } from '../sql/check-lease.js';
import { z } from 'zod';
import { isFunction, isObject } from '@fenced/shared/internal';
import { fenceGuardOptionsSchema } from '../fence-guard-options.js';
import { sqlIdentifierSchema } from './sql-identifier.js';

/** A lease name, as the coordinator accepts it. */
/** The `takeover` option's default (`fenced doctor` checks the server's timeouts against it). */
export const DEFAULT_TAKEOVER = Object.freeze({ graceMs: 250, timeoutMs: 10_000 });

/** The PostgreSQL fence store's own options (`postgresFences`, and `createGuard` given `db`), with their defaults. */
export const postgresStoreOptionsShape = {
  /** A `Kysely<DB>` over PostgresDialect, or a `pg.Pool` (anything with `connect()`). */
  db: z.custom<object>(isObject, { message: 'must be a Kysely instance or a pg.Pool' }),
  /**
   * The `pg.Pool` behind `db`'s PostgresDialect: required when `db` is a Kysely instance. Kysely
   * listens on none of the clients it checks out, and a client whose backend is killed (a restart, a
   * failover, pg_terminate_backend) then emits an `error` that kills the process. The guard listens
   * on every client of this pool, idle or checked out, and reports such errors as
   * `guard.connection-lost` events. Not needed when `db` is the pool itself.
   * @example
   * ```ts
   * const pool = new pg.Pool({ connectionString });
   * const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
   * const guard = createPostgresGuard({ db, pool, resource: 'billing' });
   * ```
   */
  pool: z
    .custom<object>((v) => isObject(v) && isFunction((v as { on?: unknown }).on), { message: 'must be the pg.Pool behind db (an EventEmitter with on())' })
    .optional(),
  /**
   * Schema holding the fence table and its functions.
   * @defaultValue `'public'`
   */
  schema: sqlIdentifierSchema.default('public'),
  /**
   * Name of the fence table; its functions are named `<table>_check` and `<table>_advance`.
   * @defaultValue `'fenced_fences'`
   */
  table: sqlIdentifierSchema.default('fenced_fences'),
  /**
   * Isolation level of the transactions `guardedWrite` opens.
   * @defaultValue `'read committed'`
   */
  isolationLevel: z.enum(['read committed', 'repeatable read', 'serializable']).default('read committed'),
  /**
   * How often a transaction the database aborted (deadlock `40P01`, serialization failure `40001`)
   * is run again before the error reaches the caller. `fn` runs once per attempt.
   * @defaultValue `5`
   */
  maxRetries: z.number().int().min(0).max(100).default(5),
  /**
   * What the election-time advance (`advance`, the coordinator's fence) does when transactions of
   * lower tokens hold it up: a deposed leader frozen inside its guarded transaction (SIGSTOP, a hung
   * VM) keeps its lock on the fence row however long it is frozen. The advance waits `graceMs`, then
   * ends the guarded transactions of lower tokens that block it (`pg_terminate_backend`; each one is
   * a `guard.takeover` event and counted in `fenced.guard.takeovers`), and again every `graceMs`;
   * it gives up after `timeoutMs` of lock waits in all (then the election fails closed and is tried
   * again). Nothing of the same or a higher token, and no session that is not a guarded write, is
   * ever ended. The role needs the right to signal the writers' backends: the same role, a member of
   * `pg_signal_backend`, or a superuser (`fenced doctor` checks). `false`: wait without bound, as
   * long as the lock is held.
   * @defaultValue `{ graceMs: 250, timeoutMs: 10000 }`
   */
  takeover: z
    .union([
      z.literal(false),
      z.object({
        graceMs: z.number().int().min(0).max(60_000).default(DEFAULT_TAKEOVER.graceMs),
        timeoutMs: z.number().int().min(100).max(600_000).default(DEFAULT_TAKEOVER.timeoutMs),
      }),
    ])
    .default(DEFAULT_TAKEOVER),
  /**
   * Lease-checked writes: when the coordinator's leases live in this database
   * (`postgresLeases` from `@fenced/coordinator/postgres`, same schema and table), every guarded
   * write also checks, in its own transaction, that its token still holds its lease and that the
   * lease has not expired by the server's clock, under a share lock on the lease row that an election
   * waits for. A deposed leader's write is then refused (`NOT_LEADER`) even before the next leader has
   * written anything, and no new term begins while a write of the old one is still open (an election
   * ends such writes of a frozen leader after its grace period). The lease of each write: a name, or
   * a function of the write's resource (a lease group's leases). A write that names its token's
   * `issuer` (the handler wrapper passes the envelope's: the coordinator's `nodeId`) must also find
   * that very node holding the lease: after a lossy failover of this database the same token can be
   * minted again for another node.
   * @defaultValue off
   * @example
   * ```ts
   * createPostgresGuard({ db: pool, resource: 'invoices', checkLease: 'billing' });
   * ```
   */
  checkLease: checkLeaseSchema,
};

/** Options of `createPostgresGuard`, with their defaults. */
export const postgresGuardOptionsSchema = fenceGuardOptionsSchema.extend(postgresStoreOptionsShape);

/** Options of `postgresFences`: the store's alone (the guard that opens it brings the resource, logger and metrics). */
export const postgresStoreOptionsSchema = z.object(postgresStoreOptionsShape);
export type PostgresStoreOptionsInput = z.input<typeof postgresStoreOptionsSchema>;
export type PostgresStoreOptions = z.output<typeof postgresStoreOptionsSchema>;

export type PostgresGuardOptionsInput = z.input<typeof postgresGuardOptionsSchema>;
export type PostgresGuardOptions = z.output<typeof postgresGuardOptionsSchema>;
