/**
 * The PostgreSQL fence store's own promises (written for StrykerJS's survivors on postgres-store.ts):
 * those both SQL stores keep (sql-store-promises.ts), and its batch check's, which only it has.
 */
import { createGuard, type TransactionExecutor } from '@fenced/consumer-guard';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { postgresLeases } from '@fenced/coordinator/postgres';
import { createEnvelope, isFencedError, parseToken, type FencedEvent } from '@fenced/shared';
import { caught, createTestSchema, kyselyOver } from '#test-support';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeSqlStorePromises, type CallerTransaction, type SqlStoreGuard } from './sql-store-promises.js';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
/** A schema where nothing was migrated: every statement of the store fails as "not migrated". */
let bare: Awaited<ReturnType<typeof createTestSchema>>;

beforeAll(async () => {
  schema = await createTestSchema('pgstore');
  bare = await createTestSchema('pgstore_bare');
  await createGuard({ db: schema.pool, resource: 'setup', schema: schema.name }).migrate();
  await postgresLeases({ pool: schema.pool, schema: schema.name }).migrate();
});
afterAll(async () => {
  await schema.drop();
  await bare.drop();
});

const on = (migrated: boolean) => (migrated ? schema : bare);

/** A transaction the test holds on its own client, as a caller's executor. */
async function begin(migrated: boolean): Promise<CallerTransaction> {
  const client = await on(migrated).pool.connect();
  // Held until release (node-postgres gives a checked-out client no listener), then taken off: a
  // pooled client is checked out again by the next test.
  const unheard = () => {};
  client.on('error', unheard);
  await client.query('BEGIN');
  const sent: Array<{ text: string; values: unknown[] | undefined }> = [];
  return {
    tx: {
      executeSql: async (text: string, values?: unknown[]) => {
        sent.push({ text, values });
        return { rows: (await client.query(text, values)).rows };
      },
    },
    sent,
    async end(how) {
      try {
        await client.query(how === 'commit' ? 'COMMIT' : 'ROLLBACK');
      } finally {
        client.off('error', unheard);
        client.release();
      }
    },
  };
}

const ownCodes = { 'lease not held': 'FN004', 'duplicate fire': 'FN003' } as const;

describeSqlStorePromises('postgres', {
  database: 'PostgreSQL',
  component: 'postgres guard',
  guard: (resource, { migrated, checkLease, logger }) =>
    createPostgresGuard({ db: on(migrated).pool, resource, schema: on(migrated).name, ...(checkLease === undefined ? {} : { checkLease }), ...(logger === undefined ? {} : { logger }) }) as unknown as SqlStoreGuard,
  begin,
  pool: () => bare.pool,
  raiseOwn: (client, refusal) =>
    (client as pg.PoolClient).query(`DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '${ownCodes[refusal]}', MESSAGE = 'the caller''s own', DETAIL = '9'; END $$`),
  ownCode: (refusal) => ({ code: ownCodes[refusal], message: "the caller's own" }),
  openLease: (lease) => postgresLeases({ pool: schema.pool, schema: schema.name }).openLease(lease, 'node-a', 15_000),
  unreachable: (resource, logger) => {
    const pool = new pg.Pool({ host: '127.0.0.1', port: 1, user: 'postgres', database: 'test', connectionTimeoutMillis: 2000 });
    return { guard: createPostgresGuard({ db: pool, resource, schema: schema.name, logger }), close: () => pool.end() };
  },
  refusedConfigurations: [
    { make: () => createPostgresGuard({ db: kyselyOver(schema.pool), resource: 'r', schema: schema.name } as never), path: 'pool', message: /^required when db is a Kysely instance: pass the pg\.Pool behind its PostgresDialect/ },
    { make: () => createPostgresGuard({ db: { query: 1 }, resource: 'r', schema: schema.name } as never), path: 'db', message: /^must be a Kysely instance or a pg\.Pool$/ },
  ],
});

let n = 0;
const fireOf = (token: bigint) => createEnvelope({ job: 'pgstore', scheduledAt: Date.UTC(2026, 11, 6, 8, 0, 0, ++n), token: parseToken(token), issuer: 'node-a', payload: {} });

describe("the PostgreSQL fence store's batch check", () => {
  function batchGuard(migrated: boolean, extra: { checkLease?: string } = {}) {
    const resource = `pgstore-batch-${++n}`;
    const events: FencedEvent[] = [];
    const guard = createGuard({ db: on(migrated).pool, resource, schema: on(migrated).name, logger: (e) => void events.push(e), ...extra });
    const handle = guard.wrapTransactionalHandler(async (_payload, ctx) => ctx.guardedWrite(async () => ctx.fireId));
    return { resource, guard, events, handle };
  }

  it('reports each verdict: the stale one with the fence it was judged against, the duplicate with its fire, the applied one accepted', async () => {
    const { resource, events, handle } = batchGuard(true);
    const [a, b, c] = [fireOf(6n), fireOf(5n), fireOf(6n)];
    const t = await begin(true);
    const outcomes = await handle.batch([a, b, a, c], t.tx);
    await t.end('commit');
    expect(outcomes.map((o) => o.status)).toEqual(['applied', 'stale', 'duplicate', 'applied']);
    // Each verdict once, in the batch's order (the handler's own write adds nothing: the batch claimed the fire).
    expect(events.filter((e) => e.type === 'token.accepted' || e.type === 'token.rejected' || e.type === 'guard.duplicate')).toEqual([
      { type: 'token.accepted', resource, token: 6n },
      { type: 'token.rejected', resource, token: 5n, highest: 6n, via: 'postgres' },
      { type: 'guard.duplicate', resource, token: 6n, fireId: a.fireId },
      { type: 'token.accepted', resource, token: 6n },
    ]);
  });

  it('refuses an executor without executeSql, or none, before anything is sent', async () => {
    const { handle } = batchGuard(true);
    for (const tx of [{}, undefined]) {
      const err = await caught(handle.batch([fireOf(1n)], tx as unknown as TransactionExecutor));
      expect(err).toBeInstanceOf(TypeError);
      expect((err as Error).message).toBe('checkBatchIn: tx must have executeSql(text, values)');
    }
  });

  it('fails typed when the check fails, and when the executor answers a verdict count other than the batch', async () => {
    const unmigrated = batchGuard(false);
    const t = await begin(false);
    const missing = await caught(unmigrated.handle.batch([fireOf(1n)], t.tx));
    await t.end('rollback');
    expect(isFencedError(missing, 'GUARD_UNAVAILABLE'), String(missing)).toBe(true);
    expect((missing as Error).message).toMatch(/^PostgreSQL guard failed during open; nothing was applied: /);
    // An executor of the caller's that loses a row (a wrapper's bug): no verdict is guessed.
    const { guard, handle } = batchGuard(true);
    const u = await begin(true);
    const lossy: TransactionExecutor = { executeSql: async (text, values) => ({ rows: (await u.tx.executeSql(text, values)).rows.slice(1) }) };
    const short = await caught(handle.batch([fireOf(2n), fireOf(2n)], lossy));
    await u.end('rollback');
    expect(isFencedError(short, 'GUARD_UNAVAILABLE'), String(short)).toBe(true);
    expect((short as Error).message).toBe('PostgreSQL guard failed during open; nothing was applied: the batch check answered 1 verdicts for 2 fires');
    expect(await guard.highest()).toBeNull();
  });

  it('is not offered when writes are lease-checked (the batch check checks no lease): the jobs go one by one', async () => {
    const plain = batchGuard(true);
    const t = await begin(true);
    await plain.handle.batch([fireOf(1n), fireOf(1n)], t.tx);
    await t.end('commit');
    expect(t.sent.filter((s) => s.text.includes('_check_batch'))).toHaveLength(1);
    const { handle } = batchGuard(true, { checkLease: `pgstore-lease-${++n}` });
    const u = await begin(true);
    // The lease was never granted: the first job's own check refuses it, and the batch ends there.
    const refused = await caught(handle.batch([fireOf(1n), fireOf(1n)], u.tx));
    await u.end('rollback');
    expect(isFencedError(refused, 'NOT_LEADER'), String(refused)).toBe(true);
    expect(u.sent.filter((s) => s.text.includes('_check_batch'))).toEqual([]);
    expect(u.sent.filter((s) => s.text.includes('_lease_check'))).toHaveLength(1);
  });
});
