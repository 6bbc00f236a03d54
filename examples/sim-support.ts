/**
 * What both example services' simulation glue needs (the ledger app in ledger-sim/, the BullMQ
 * service in bullmq-sim/): a short-lived pool, the run's schema, the effects and the fires expected,
 * the guard's fence state, the control's unguarded write, and the leadership lines a replica reports.
 */
import pg from 'pg';
import type { Cluster, Redis } from 'ioredis';
import type { Effect, FenceState, RunContext } from '@fenced/chaos';
import { fireId, type Coordinator } from '@fenced/coordinator';
import { postgresControlState, redisControlState, startNaiveScheduler } from './ledger-sim/naive-scheduler.js';
import { createGuard } from '@fenced/consumer-guard';
import { createRedisGuard } from '@fenced/consumer-guard/redis';
import { postgresLeases } from '@fenced/coordinator/postgres';
import { mysqlLeases } from '@fenced/coordinator/mysql';
import mysql from 'mysql2/promise';
import { failpoints } from '@fenced/shared/failpoints';

export type Report = (record: Record<string, unknown>) => void;

/** A replica's or a service's required setting: its environment variable, or a clear error. */
export function env(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is required`);
  return value;
}

/** One JSON line on stdout, tokens (bigints) as decimal strings: what the simulation reads. */
export const line: Report = (record) => {
  process.stdout.write(`${JSON.stringify(record, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}\n`);
};

/**
 * The control's scheduler, as both example services run it: on the coordinator's lease alone, the
 * last fire kept beside the lease (the same hash tag, so the same Cluster slot) with a plain HSET, due
 * times from the server's clock or, with CONTROL_CLOCK=local, this process's own. Each dispatch is
 * reported, then handed to `deliver`. Returns its stop function.
 */
export function startControlScheduler(options: {
  /** Where the last fire is kept and whose clock is read: Redis, or PostgreSQL where the run has no Redis. */
  readonly store: { readonly redis: Redis | Cluster } | { readonly pool: pg.Pool };
  readonly keyPrefix: string;
  readonly lease: string;
  readonly job: string;
  readonly everyMs: number;
  readonly coordinator: Coordinator;
  readonly report: Report;
  readonly deliver: (fire: { fireId: string; scheduledAt: number; token: bigint }) => Promise<void>;
}): () => void {
  const { coordinator, report, deliver } = options;
  return startNaiveScheduler({
    state: 'redis' in options.store ? redisControlState(options.store.redis, `${options.keyPrefix}:{${options.lease}}:naive:last-fired`) : postgresControlState(options.store.pool),
    clock: process.env['CONTROL_CLOCK'] === 'local' ? 'local' : 'server',
    job: options.job,
    everyMs: options.everyMs,
    catchUpWindowMs: 60_000,
    isLeader: () => coordinator.isLeader(),
    token: () => coordinator.token(),
    fireId,
    dispatch: async (fire) => {
      report({ kind: 'dispatch', fireId: fire.fireId, token: fire.token, scheduledAt: fire.scheduledAt, leading: coordinator.token() === fire.token });
      try {
        await deliver(fire);
      } finally {
        report({ kind: 'handled', fireId: fire.fireId }); // the checker credits a catch-up with this busy time
      }
    },
  });
}

/**
 * The effects a run left, from a query returning one row per committed effect with the columns
 * resource, fire_id, token, node, commit_seq, scheduled_at and committed_at (the times in epoch ms).
 */
export async function readEffects(run: RunContext, query: { text: string; values?: unknown[] }): Promise<Effect[]> {
  return withPool(run.databaseUrl, async (pool) => {
    const { rows } = await pool.query(query.text, query.values ?? []);
    return rows.map(
      (r): Effect => ({
        resource: r.resource,
        fireId: r.fire_id,
        token: BigInt(r.token),
        node: r.node,
        commitSeq: Number(r.commit_seq),
        scheduledAt: Number(r.scheduled_at),
        committedAt: Number(r.committed_at),
      }),
    );
  });
}

/**
 * The ids of every fire of an `everyMs` job due in [from, to], as the wire contract spells them
 * (`<job>@<basic ISO-8601 UTC, ms>`), written out here rather than taken from the SDK's `fireId`: the
 * checker's expectations must not come from the code under test, or a fire id that loses precision
 * would expect exactly the fires it merged.
 */
export function expectedFireIds(job: string, everyMs: number, from: number, to: number): string[] {
  const ids: string[] = [];
  for (let at = Math.ceil(from / everyMs) * everyMs; at <= to; at += everyMs) ids.push(`${job}@${new Date(at).toISOString().replace(/[-:]/g, '')}`);
  return ids;
}

export async function withPool<T>(databaseUrl: string, fn: (pool: pg.Pool) => Promise<T>): Promise<T> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  pool.on('error', () => {});
  try {
    return await fn(pool);
  } finally {
    await pool.end();
  }
}

/** The run's own schema with the app's tables (`sql`) and the guard's, for `resource`. */
export async function prepareSchema(run: RunContext, sql: string, resource: string): Promise<void> {
  await withPool(run.databaseUrl, async (pool) => {
    await pool.query(`CREATE SCHEMA "${run.id}"`);
    await pool.query(`SET search_path TO "${run.id}"; ${sql}`);
    await createGuard({ db: pool, resource, schema: run.id }).migrate();
    // The lease store beside the fences, when the run keeps its lease in PostgreSQL.
    if (run.leaseStore === 'postgres') await postgresLeases({ pool, schema: run.id }).migrate();
  });
  // On the MySQL store: its tables and procedures in the run's own MariaDB.
  if (run.mysqlUrl !== undefined) {
    const pool = mysql.createPool({ uri: run.mysqlUrl, connectionLimit: 1 });
    try {
      await mysqlLeases({ pool }).migrate();
    } finally {
      await pool.end();
    }
  }
}

export async function dropSchema(run: RunContext): Promise<void> {
  await withPool(run.databaseUrl, (pool) => pool.query(`DROP SCHEMA IF EXISTS "${run.id}" CASCADE`));
}

/** The fence PostgreSQL committed and the guard's Redis mark (none in a control). Disconnects `redis`. */
export async function guardFenceStates(run: RunContext, redis: Redis | Cluster | undefined, resource: string): Promise<FenceState[]> {
  redis?.on('error', () => {});
  try {
    if (run.mode === 'control') return [];
    const fence = await withPool(run.databaseUrl, (pool) => createGuard({ db: pool, resource, schema: run.id }).highest());
    // On the PostgreSQL and etcd lease stores the guard runs without Redis: no mark to compare.
    const mark = run.leaseStore !== 'redis' || redis === undefined ? null : await createRedisGuard({ redis, resource, keyPrefix: run.id }).highest();
    return [{ resource, fence: fence?.toString() ?? null, mark: mark?.toString() ?? null }];
  } finally {
    redis?.disconnect();
  }
}

/** A replica's beliefs (and, guarded, its counter repairs) as the simulation's lines. */
export function reportLeadership(coordinator: Coordinator, report: Report): void {
  coordinator.on('elected', ({ token }) => report({ kind: 'belief', leader: true, token }));
  coordinator.on('lost', ({ reason }) => report({ kind: 'belief', leader: false, reason }));
  coordinator.on('regression', ({ token }) => report({ kind: 'repair', token }));
}

/**
 * The control's write: one INSERT in its own transaction, no fence, no dedupe, reported as the
 * simulation expects, with the guarded write's failpoint before its COMMIT so the same faults land
 * at the same moment.
 */
export async function writeUnguarded(pool: pg.Pool, insert: { text: string; values: unknown[] }, fire: { fireId: string; token: bigint | string }, report: Report): Promise<void> {
  // A connection that never comes (the pool exhausted, the database down) is a write that failed
  // with nothing applied: said so, or the history holds it in flight for good.
  const client = await pool.connect().catch((err: unknown) => {
    report({ kind: 'write', outcome: 'failed', fireId: fire.fireId, token: fire.token, reason: (err as Error).message });
    throw err;
  });
  // A checked-out client has no listener from pg-pool: a killed backend would kill the replica.
  let lost: Error | undefined;
  const onError = (err: Error) => void (lost ??= err);
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    await client.query(insert.text, insert.values);
    if (failpoints.armed) await failpoints.hit('guard.checked-before-commit');
    await client.query('COMMIT');
    report({ kind: 'write', outcome: 'committed', fireId: fire.fireId, token: fire.token });
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    report({ kind: 'write', outcome: 'failed', fireId: fire.fireId, token: fire.token, reason: (err as Error).message });
    throw err;
  } finally {
    client.removeListener('error', onError);
    client.release(lost);
  }
}
