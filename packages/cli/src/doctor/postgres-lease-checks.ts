import { randomBytes } from 'node:crypto';
import { LATEST_LEASE_MIGRATION, leaseObjectNames } from '@fenced/coordinator/postgres';
import type pg from 'pg';
import { humanMs } from '../text-table.js';
import { fail, pass, warn, type CheckResult } from './check.js';

// The checks of a PostgreSQL lease store (`postgresLeases`): what its promise needs from the server.

export async function leaseMigrationsCheck(pool: pg.Pool, schema: string, table: string): Promise<CheckResult> {
  const id = 'leases.migrations';
  const names = leaseObjectNames(schema, table);
  const exists = (await pool.query<{ t: string | null }>(`SELECT to_regclass($1) AS t`, [`${names.migrations}`])).rows[0]?.t !== null;
  const applied = exists ? Number((await pool.query<{ id: number }>(`SELECT coalesce(max(id), 0) AS id FROM ${names.migrations}`)).rows[0]!.id) : 0;
  const where = names.installation;
  if (applied === LATEST_LEASE_MIGRATION) return pass(id, `${where}: migration ${applied} of ${LATEST_LEASE_MIGRATION} applied.`);
  if (applied > LATEST_LEASE_MIGRATION) {
    return fail(id, `${where}: migration ${applied} applied, newer than this version of fenced knows (${LATEST_LEASE_MIGRATION}).`, 'Upgrade every service that runs leases here (and this CLI) to the version that applied it.');
  }
  return fail(id, `${where}: ${applied === 0 ? 'not migrated' : `migration ${applied} of ${LATEST_LEASE_MIGRATION}`}: every lease call fails with SCHEMA_MISSING.`, 'Run postgresLeases({ pool }).migrate() once at deploy (idempotent, safe to race).');
}

/** A grant or a renew acknowledged before it is durable can be forgotten by a crash, its token minted again. */
export async function leaseDurabilityCheck(pool: pg.Pool): Promise<CheckResult> {
  const id = 'leases.durability';
  const row = (await pool.query<{ sc: string; fsync: string }>(`SELECT current_setting('synchronous_commit') AS sc, current_setting('fsync') AS fsync`)).rows[0]!;
  if (row.fsync === 'off') return fail(id, 'fsync is off: a crash can lose granted leases and minted tokens, and the next election mint a token a leader already used.', 'Turn fsync on.');
  if (row.sc === 'off') {
    return warn(id, 'synchronous_commit is off: a crash can lose the last grants (and their tokens) though the holders were told they lead.', "ALTER ROLE … SET synchronous_commit = 'on' for the role the coordinators connect as (or on for the database).");
  }
  return pass(id, `synchronous_commit ${row.sc}, fsync on: a granted lease and its token survive a crash.`);
}

/**
 * What asynchronous replication can lose: the leases, their tokens and the fences live in one
 * database and are lost together, so a failover to a standby that missed the last grant can mint the
 * same token again for a new leader while the deposed one (still on its old connections, or its
 * writes queued) holds it: equal tokens pass a fence.
 */
export async function leaseReplicationCheck(pool: pg.Pool): Promise<CheckResult> {
  const id = 'leases.replication';
  const [server] = (await pool.query<{ recovery: boolean; sync_names: string; sc: string }>(
    `SELECT pg_is_in_recovery() AS recovery, current_setting('synchronous_standby_names') AS sync_names, current_setting('synchronous_commit') AS sc`,
  )).rows;
  if (server!.recovery) return fail(id, 'this server is a standby (in recovery): leases cannot be granted here.', 'Point the coordinators at the primary.');
  const standbys = (await pool.query<{ name: string; state: string; sync_state: string }>(`SELECT application_name AS name, state, sync_state FROM pg_stat_replication`)).rows;
  if (standbys.length === 0) return pass(id, 'no streaming standby: nothing to fail over to, nothing replication can lose (a restore from backup can: raise the lease tokens above the restored fences with the election-time advance, which the coordinator does).');
  const async = standbys.filter((s) => s.sync_state === 'async' || s.sync_state === 'potential');
  if (async.length === standbys.length) {
    return warn(
      id,
      `${standbys.length} standby(s), all asynchronous (${standbys.map((s) => s.name || '?').join(', ')}): a failover can lose the last grants with their tokens and fences, and an election on the promoted standby can mint a token the deposed leader still writes with (equal tokens pass a fence).`,
      "Make a standby synchronous for the lease store (synchronous_standby_names, synchronous_commit = 'remote_apply' or 'on') and fail over only to it; or fence the old primary (stop it) before promoting. Give postgresLeases a pool per member (confirmPrimary) so that a deposed primary that resumes grants nothing.",
    );
  }
  return pass(id, `${standbys.length} standby(s), ${standbys.length - async.length} synchronous (synchronous_commit ${server!.sc}): a failover to a synchronous standby loses no grant.`);
}

/** A frozen writer's transaction and the lease's TTL: what ends it, and when. */
export async function leaseIdleTimeoutCheck(pool: pg.Pool, ttls: readonly number[]): Promise<CheckResult> {
  const id = 'leases.idle-timeout';
  const ms = Number((await pool.query<{ ms: string }>(`SELECT extract(epoch FROM current_setting('idle_in_transaction_session_timeout')::interval) * 1000 AS ms`)).rows[0]!.ms);
  const ttl = ttls.length === 0 ? null : Math.max(...ttls);
  const setting = `idle_in_transaction_session_timeout ${ms === 0 ? 'off' : humanMs(ms)}`;
  if (ms === 0) {
    return warn(
      id,
      `${setting}: an election ends the lease-checked writes of a frozen leader after its grace period, but a guarded write that checks no lease is ended only by a fence advance or when its process wakes.`,
      `Set it for the writers' role, above your longest pause inside one transaction${ttl === null ? '' : ` and above the TTL (${humanMs(ttl)})`}.`,
    );
  }
  if (ttl !== null && ms < ttl) {
    return warn(id, `${setting}, below the TTL (${humanMs(ttl)}): a writer pausing that long inside its transaction is ended while its term still runs.`, `Raise it above the TTL (${humanMs(ttl)}).`);
  }
  return pass(id, `${setting}${ttl === null ? '' : `, above the TTL (${humanMs(ttl)})`}: a frozen writer's transaction ends by itself in time.`);
}

/**
 * Whether LISTEN/NOTIFY works through this pool: a NOTIFY sent on one connection must reach another
 * that listens. Behind a pooler in transaction mode it does not (the standbys then poll).
 */
export async function leaseListenCheck(pool: pg.Pool, timeoutMs = 2000): Promise<CheckResult> {
  const id = 'leases.listen';
  const channel = `fenced_doctor_${randomBytes(6).toString('hex')}`;
  const client = await pool.connect();
  let lost: Error | undefined;
  client.on('error', (err) => (lost ??= err));
  try {
    const heard = new Promise<boolean>((resolve) => {
      client.on('notification', (m) => m.channel === channel && resolve(true));
      setTimeout(() => resolve(false), timeoutMs).unref();
    });
    await client.query(`LISTEN ${channel}`);
    await pool.query('SELECT pg_notify($1, $2)', [channel, 'probe']);
    if (await heard) return pass(id, 'LISTEN/NOTIFY reaches a listening connection through this pool: standbys hear a release at once (a handover in milliseconds).');
    return warn(
      id,
      `a NOTIFY sent through this pool did not reach a LISTEN connection within ${humanMs(timeoutMs)}: a pooler in transaction mode (PgBouncer)? Standbys then poll for released leases (lease.listening events say so), and a handover takes up to the poll interval.`,
      'Give the coordinators a pool that connects to PostgreSQL directly (or through a pooler in session mode); or set pollMs to the handover time you need.',
    );
  } finally {
    client.release(true); // it listened: never back to the pool
    void lost;
  }
}

/** The server's clock against this machine's: due times come from the server. */
export async function leaseClockCheck(pool: pg.Pool): Promise<CheckResult> {
  const id = 'leases.clock';
  const before = Date.now();
  const server = Number((await pool.query<{ ms: string }>(`SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS ms`)).rows[0]!.ms);
  const after = Date.now();
  const offset = server - (before + after) / 2;
  const detail = `the database server's clock is ${humanMs(Math.abs(offset))} ${offset >= 0 ? 'ahead of' : 'behind'} this machine's (round trip ${humanMs(after - before)}). Due times and lease expiry come from the server's clock; deadlines from each process's monotonic clock.`;
  if (Math.abs(offset) > 60_000) return warn(id, detail, 'Run NTP on the database server and the replicas: logs and the status page compare wall clocks.');
  return pass(id, detail);
}
