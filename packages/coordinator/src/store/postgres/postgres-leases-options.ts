import { z } from 'zod';
import { leaseTakeoverSchema } from '../lease-takeover.js';
import { isFunction, sqlIdentifierSchema } from '@fenced/shared/internal';
import { isPgLeasePool } from './pg-pool.js';

/** Options of `postgresLeases`, with their defaults. */
export const postgresLeasesOptionsSchema = z.object({
  /** A `pg.Pool`: the one the guard already has. One of its clients is held for LISTEN while leases run. */
  pool: z.custom<object>(isPgLeasePool, { message: 'must be a pg.Pool (query() and connect())' }),
  /**
   * The guard's schema: the lease rows live beside its fences.
   * @defaultValue `'public'`
   */
  schema: sqlIdentifierSchema.default('public'),
  /**
   * The guard's fence table: elections mint above every fence in it, and the lease objects are named
   * after it (`<table>_leases`, `<table>_lease_acquire`, …).
   * @defaultValue `'fenced_fences'`
   */
  table: sqlIdentifierSchema.default('fenced_fences'),
  /**
   * How standbys hear a release: `auto` LISTENs on a connection of its own (a handover in
   * milliseconds), proves it with a probe NOTIFY and polls where it does not work (behind a pooler in
   * transaction mode); `poll` never LISTENs.
   * @defaultValue `'auto'`
   */
  listen: z.enum(['auto', 'poll']).default('auto'),
  /**
   * How often standbys look for a free lease while notifications do not work.
   * @defaultValue `250`
   */
  pollMs: z.number().int().min(10).max(60_000).default(250),
  /**
   * How long the probe NOTIFY may take to arrive before LISTEN counts as not working here.
   * @defaultValue `2000`
   */
  probeTimeoutMs: z.number().int().min(10).max(60_000).default(2000),
  /**
   * How an election waits for the lease-checked writes of an expired term (the guard's `checkLease`):
   * `graceMs` at a time, ending those still open after each wait (`pg_terminate_backend`; a deposed
   * leader frozen inside its transaction cannot hold the election off), `timeoutMs` in all (bounded
   * by the acquire's own timeout, a third of the TTL). The role needs the right to signal them: the
   * same role, or `pg_signal_backend`.
   * @defaultValue `{ graceMs: 250, timeoutMs: 10000 }`
   */
  takeover: leaseTakeoverSchema,
  /**
   * How long a renew waits for others to share its statement: every lease this process renews within
   * the window goes in one statement (a lease group's renews align by themselves after one round).
   * Safe: a coordinator counts its deadline from when it asked, before the wait.
   * @defaultValue `20`
   */
  renewWindowMs: z.number().int().min(0).max(1000).default(20),
  /**
   * For a cluster with streaming replicas and failover: a `pg.Pool` per member (the primary and every
   * replica, each reaching that server directly). Every grant and renew then counts only when its
   * server is the primary on the cluster's latest timeline, so that a deposed primary that wakes up
   * with connections still open to it grants nothing (see primary-confirmation.ts).
   * `timeoutMs`: how long a member may take to answer before it is left out.
   */
  confirmPrimary: z
    .object({
      members: z.array(z.custom<object>(isPgLeasePool, { message: 'must be a pg.Pool (query() and connect())' })).min(1),
      timeoutMs: z.number().int().min(10).max(60_000).default(1000),
    })
    .optional(),
  /** Receives the pool's errors on idle clients as `lease-store.error` events (`store: 'postgres'`) (the store listens on the pool). */
  logger: z.custom<(event: never) => void>(isFunction, { message: 'must be a function' }).optional(),
});

export type PostgresLeasesOptionsInput = z.input<typeof postgresLeasesOptionsSchema>;
