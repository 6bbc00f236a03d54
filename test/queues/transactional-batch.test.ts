/**
 * The batch path of the transactional handler (`handle.batch`, what `toPgBossHandler` runs): one
 * check for a whole batch in the caller's transaction, a verdict per job instead of a raise, so no
 * savepoint; judged in order as one job after another would be. Its own promise, on real PostgreSQL,
 * beside the sequential path it must agree with.
 */
import { createGuard, type Guard, type TransactionExecutor } from '@fenced/consumer-guard';
import { createEnvelope, isFencedError, parseToken, type Envelope } from '@fenced/shared';
import { createTestSchema, waitFor, waitForLockWait } from '#test-support';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let schema: Awaited<ReturnType<typeof createTestSchema>>;

beforeAll(async () => {
  schema = await createTestSchema('batch');
  await schema.pool.query('CREATE TABLE ledger (id serial PRIMARY KEY, resource text NOT NULL, fire_id text NOT NULL, token bigint NOT NULL)');
  await createGuard({ db: schema.pool, resource: 'setup', schema: schema.name }).migrate();
});
afterAll(async () => schema.drop());

let n = 0;
const fire = (token: bigint, at = n++): Envelope => createEnvelope({ job: 'ledger', scheduledAt: Date.UTC(2026, 11, 2, 10, 0, 0, at), token: parseToken(token), issuer: 'node-a', payload: { at } });

/** A caller-held transaction on its own connection, its statements counted by kind. */
async function transaction(): Promise<{ tx: TransactionExecutor; statements: string[]; client: pg.PoolClient; commit(): Promise<void>; rollback(): Promise<void> }> {
  const client = await schema.pool.connect();
  client.on('error', () => {});
  await client.query('BEGIN');
  const statements: string[] = [];
  return {
    tx: {
      executeSql: async (text: string, values?: unknown[]) => {
        statements.push(text);
        return { rows: (await client.query(text, values)).rows };
      },
    },
    statements,
    client,
    commit: async () => {
      await client.query('COMMIT');
      client.release();
    },
    rollback: async () => {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release(true);
    },
  };
}

function ledgerGuard(resource: string, extra: { checkLease?: string } = {}): { guard: Guard<pg.PoolClient>; handle: ReturnType<Guard<pg.PoolClient>['wrapTransactionalHandler']>; ran: string[] } {
  const guard = createGuard({ db: schema.pool, resource, schema: schema.name, ...extra });
  const ran: string[] = [];
  const handle = guard.wrapTransactionalHandler(async (_payload, ctx) => {
    ran.push(ctx.fireId);
    await ctx.guardedWrite((tx) => tx.executeSql(`INSERT INTO "${schema.name}".ledger (resource, fire_id, token) VALUES ($1, $2, $3)`, [resource, ctx.fireId, ctx.token.toString()]));
    return ctx.fireId;
  });
  return { guard, handle, ran };
}

const ledger = async (resource: string) => (await schema.pool.query<{ fire_id: string; token: string }>('SELECT fire_id, token FROM ledger WHERE resource = $1 ORDER BY id', [resource])).rows;

describe('a transactional batch', () => {
  it('is checked by one statement, no savepoint, a verdict per job in order: stale, duplicate (within the batch too) and applied, as one by one', async () => {
    const batch = [fire(5n), fire(5n), undefined, fire(7n), fire(6n), fire(7n)];
    batch[2] = batch[1]!; // the same fire twice in one batch
    const envelopes = batch as Envelope[];
    const outcomes: Record<string, string[]> = {};
    for (const path of ['batch', 'one by one'] as const) {
      const resource = `batch-${path.replace(/ /g, '-')}-${n++}`;
      const { guard, handle, ran } = ledgerGuard(resource);
      const t = await transaction();
      const result = path === 'batch' ? await handle.batch(envelopes, t.tx) : await (async () => { const out = []; for (const e of envelopes) out.push(await handle(e, t.tx)); return out; })();
      await t.commit();
      outcomes[path] = result.map((o) => o.status);
      // Batched, no handler starts for a stale or duplicate job (one by one, each starts, then its write is refused).
      if (path === 'batch') expect(ran).toEqual([envelopes[0]!.fireId, envelopes[1]!.fireId, envelopes[3]!.fireId, envelopes[5]!.fireId]);
      expect((await ledger(resource)).map((r) => r.token)).toEqual(['5', '5', '7', '7']);
      expect(await guard.highest()).toBe(7n);
      expect(result[4]).toMatchObject({ status: 'stale', highest: 7n });
      if (path === 'batch') {
        expect(t.statements.filter((s) => /SAVEPOINT/i.test(s))).toEqual([]);
        expect(t.statements.filter((s) => /_check/.test(s))).toHaveLength(1);
      } else {
        expect(t.statements.filter((s) => /^SAVEPOINT/i.test(s)).length).toBe(envelopes.length);
      }
    }
    expect(outcomes['batch']).toEqual(['applied', 'applied', 'duplicate', 'applied', 'stale', 'applied']);
    expect(outcomes['batch']).toEqual(outcomes['one by one']);
  });

  it('holds the fence until its transaction ends: a batch that raised it keeps a lower write waiting, which is then refused', async () => {
    const resource = `batch-lock-${n++}`;
    const { guard, handle } = ledgerGuard(resource);
    await guard.guardedWrite(3n, async () => undefined);
    const t = await transaction();
    await handle.batch([fire(4n), fire(4n)], t.tx);
    const lower = guard.guardedWrite(3n, async () => undefined).catch((err: unknown) => err);
    await waitForLockWait(schema.pool, 'fenced_fences_check');
    await t.commit();
    expect(isFencedError(await lower, 'STALE_TOKEN')).toBe(true);
    expect(await guard.highest()).toBe(4n);
  });

  it('batches of one term run side by side (the shared lock), and a rolled-back batch leaves no fence and no claim', async () => {
    const resource = `batch-shared-${n++}`;
    const { guard, handle } = ledgerGuard(resource);
    await guard.guardedWrite(9n, async () => undefined);
    const a = await transaction();
    const b = await transaction();
    // Both checked while both are open: neither waits for the other.
    await handle.batch([fire(9n), fire(9n)], a.tx);
    await handle.batch([fire(9n), fire(9n)], b.tx);
    await a.commit();
    await b.commit();
    expect(await ledger(resource)).toHaveLength(4);

    const c = await transaction();
    const rolledBack = fire(12n);
    await handle.batch([rolledBack], c.tx);
    await c.rollback();
    expect(await guard.highest()).toBe(9n);
    expect(await guard.appliedOutcome(rolledBack.fireId)).toBeNull();
  });

  it("is announced with its highest token: an election above it ends a frozen batch, one at or below it does not", async () => {
    const resource = `batch-takeover-${n++}`;
    const { guard, handle } = ledgerGuard(resource);
    await guard.guardedWrite(2n, async () => undefined);
    const frozen = await transaction();
    await handle.batch([fire(2n), fire(3n)], frozen.tx);
    // At the batch's own top: the advance waits, then is refused by the fence the batch commits.
    const atTop = guard.advance(3n).catch((err: unknown) => err);
    await waitForLockWait(schema.pool, 'fenced_fences_advance');
    await frozen.commit();
    expect(isFencedError(await atTop, 'FENCE_AHEAD')).toBe(true);

    const frozenAgain = await transaction();
    await handle.batch([fire(3n), fire(3n)], frozenAgain.tx);
    await guard.advance(4n); // ends the frozen batch's session after the grace period
    expect(await guard.highest()).toBe(4n);
    await waitFor(async () => (await frozenAgain.client.query('SELECT 1').then(() => false, () => true)), 10_000);
    await frozenAgain.rollback();
  });

  it('refuses a malformed envelope before anything is checked, and a handler error reaches the caller with its batch', async () => {
    const resource = `batch-bad-${n++}`;
    const { guard, handle } = ledgerGuard(resource);
    const t = await transaction();
    const refused = await handle.batch([fire(1n), { ...fire(1n), token: '01' }], t.tx).catch((err: unknown) => err);
    expect(isFencedError(refused, 'INVALID_ENVELOPE')).toBe(true);
    expect(t.statements).toEqual([]);
    await t.rollback();

    const failing = guard.wrapTransactionalHandler(async () => {
      throw new Error('handler failed');
    });
    const u = await transaction();
    await expect(failing.batch([fire(1n)], u.tx)).rejects.toThrow('handler failed');
    await u.rollback();
    expect(await guard.highest()).toBeNull();
  });

  it("a job whose queue gave up on it (its signal aborted) writes nothing, batched or one by one", async () => {
    const resource = `batch-abandoned-${n++}`;
    const { guard, handle } = ledgerGuard(resource);
    const gaveUp = new AbortController();
    gaveUp.abort(new Error('job expired'));
    const t = await transaction();
    const batched = await handle.batch([fire(1n)], t.tx, [{ signal: gaveUp.signal }]).catch((err: unknown) => err);
    expect(isFencedError(batched, 'GUARD_UNAVAILABLE')).toBe(true);
    const single = await handle(fire(1n), t.tx, { signal: gaveUp.signal }).catch((err: unknown) => err);
    expect(isFencedError(single, 'GUARD_UNAVAILABLE')).toBe(true);
    expect(t.statements.some((s) => /INSERT INTO .*ledger/.test(s))).toBe(false);
    await t.rollback();
    expect(await ledger(resource)).toEqual([]);
    expect(await guard.highest()).toBeNull();
  });

  it('a lease-checked guard runs the batch one job at a time (the batch check checks no lease)', async () => {
    const resource = `batch-lease-${n++}`;
    const { handle } = ledgerGuard(resource, { checkLease: 'no-such-lease' });
    const t = await transaction();
    const outcome = await handle.batch([fire(1n)], t.tx).catch((err: unknown) => err);
    await t.rollback();
    // One by one: the lease check ran (under its savepoint), and refused the write (no lease held).
    expect(isFencedError(outcome), String(outcome)).toBe(true);
    expect(t.statements.some((s) => /SAVEPOINT/.test(s))).toBe(true);
  });
});
