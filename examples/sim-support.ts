/**
 * What both example services' simulation glue needs (the ledger app in ledger-sim/, the BullMQ
 * service in bullmq-sim/): a short-lived pool, the run's schema, the guard's fence state, the
 * control's unguarded write, and the leadership lines a replica reports.
 */
import pg from 'pg';
import type { Cluster, Redis } from 'ioredis';
import type { FenceState, RunContext } from '@fenced/chaos';
import type { Coordinator } from '@fenced/coordinator';
import { createGuard } from '@fenced/consumer-guard';
import { createRedisGuard } from '@fenced/consumer-guard/redis';
import { failpoints } from '@fenced/shared/failpoints';

export type Report = (record: Record<string, unknown>) => void;

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
export function prepareSchema(run: RunContext, sql: string, resource: string): Promise<void> {
  return withPool(run.databaseUrl, async (pool) => {
    await pool.query(`CREATE SCHEMA "${run.id}"`);
    await pool.query(`SET search_path TO "${run.id}"; ${sql}`);
    await createGuard({ db: pool, resource, schema: run.id }).migrate();
  });
}

export async function dropSchema(run: RunContext): Promise<void> {
  await withPool(run.databaseUrl, (pool) => pool.query(`DROP SCHEMA IF EXISTS "${run.id}" CASCADE`));
}

/** The fence PostgreSQL committed and the guard's Redis mark (none in a control). Disconnects `redis`. */
export async function guardFenceStates(run: RunContext, redis: Redis | Cluster, resource: string): Promise<FenceState[]> {
  redis.on('error', () => {});
  try {
    if (run.mode === 'control') return [];
    const fence = await withPool(run.databaseUrl, (pool) => createGuard({ db: pool, resource, schema: run.id }).highest());
    const mark = await createRedisGuard({ redis, resource, keyPrefix: run.id }).highest();
    return [{ resource, fence: fence?.toString() ?? null, mark: mark?.toString() ?? null }];
  } finally {
    redis.disconnect();
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
  const client = await pool.connect();
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
    client.release();
  }
}
