import { z } from 'zod';
import { leaseTakeoverSchema } from '../lease-takeover.js';
import { isFunction, sqlIdentifierSchema } from '@fenced/shared/internal';
import { isMysqlLeasePool } from './mysql-pool.js';

/** Options of `mysqlLeases`, with their defaults. */
export const mysqlLeasesOptionsSchema = z.object({
  /** A mysql2 promise pool (`mysql2/promise`'s `createPool`): the one the guard already has. */
  pool: z.custom<object>(isMysqlLeasePool, { message: "must be a mysql2 promise pool (require('mysql2/promise').createPool)" }),
  /**
   * The guard's database: the lease rows live beside its fences.
   * @defaultValue the connection's current database
   */
  database: sqlIdentifierSchema.optional(),
  /**
   * The guard's fence table: elections mint above every fence in it, and the lease objects are named
   * after it (`<table>_leases`, `<table>_lease_acquire`, …).
   * @defaultValue `'fenced_fences'`
   */
  table: sqlIdentifierSchema.default('fenced_fences'),
  /**
   * How often standbys look for a free lease (MySQL/MariaDB has no LISTEN/NOTIFY): one statement per
   * look for all the leases this process waits for; a handover takes at most one look after the
   * release (half of one on average).
   * @defaultValue `50`
   */
  pollMs: z.number().int().min(10).max(60_000).default(50),
  /**
   * How long a renew waits for others to share its statement: every lease this process renews within
   * the window goes in one call (a lease group's renews align by themselves after one round). Safe: a
   * coordinator counts its deadline from when it asked, before the wait.
   * @defaultValue `20`
   */
  renewWindowMs: z.number().int().min(0).max(1000).default(20),
  /**
   * How a grant waits for what the expired term still holds open on its term row (the guard's
   * lease-checked writes, `checkLease`; the scheduler's records): `graceMs` at a time, ending those
   * sessions after each wait (`KILL CONNECTION`: a deposed leader frozen inside its transaction cannot
   * hold the election off), `timeoutMs` in all (bounded by the acquire's own timeout, a third of the
   * TTL). The user needs the right to end them: the same user, or `CONNECTION ADMIN` / `SUPER`.
   * @defaultValue `{ graceMs: 250, timeoutMs: 10000 }`
   */
  takeover: leaseTakeoverSchema,
  /** Receives `migration.applied` events. */
  logger: z.custom<(event: never) => void>(isFunction, { message: 'must be a function' }).optional(),
});

export type MysqlLeasesOptionsInput = z.input<typeof mysqlLeasesOptionsSchema>;
