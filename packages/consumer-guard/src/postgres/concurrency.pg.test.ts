import { isFencedError, type FencedEvent } from '@fenced/shared';
import { createTestSchema, waitForLockWait } from '#test-support';
import fc from 'fast-check';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresGuard } from './index.js';

// Commit order is what the promise is about, so the ledger records it: a deferred constraint trigger
// runs at COMMIT and stamps each row from a sequence. A higher-token transaction cannot reach its own
// commit-time stamp before every lower-token transaction it had to wait for has committed, so with a
// correct guard the stamps, in order, never go down in token. A guard that checked without holding
// its lock to commit would let a lower token stamp after a higher one.
const LEDGER = `
  CREATE SEQUENCE commit_order;
  CREATE TABLE ledger (
    id serial PRIMARY KEY,
    attempt text NOT NULL UNIQUE,
    resource text NOT NULL,
    token bigint NOT NULL,
    commit_seq bigint
  );
  CREATE FUNCTION stamp_commit() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    UPDATE ledger SET commit_seq = nextval('commit_order') WHERE id = NEW.id;
    RETURN NULL;
  END $$;
  CREATE CONSTRAINT TRIGGER stamp_commit AFTER INSERT ON ledger
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION stamp_commit();
  CREATE TABLE hot_rows (id int PRIMARY KEY, n int NOT NULL);
  INSERT INTO hot_rows VALUES (1, 0), (2, 0);
`;

let schema: Awaited<ReturnType<typeof createTestSchema>>;

beforeAll(async () => {
  schema = await createTestSchema('conc');
  await schema.pool.query(LEDGER);
  await createPostgresGuard({ db: schema.pool, resource: 'setup', schema: schema.name }).migrate();
});
afterAll(async () => {
  await schema.drop();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** How long the SERIALIZABLE writers keep their transactions open: the shape of the load, not a wait for an outcome. */
const HOLD_OPEN_MS = 20;

interface Outcome {
  attempt: string;
  token: bigint;
  result: 'accepted' | 'stale' | 'other';
  error?: unknown;
}

/** Writes one ledger row under the guard, optionally holding the transaction open for `holdMs`. */
async function write(
  resource: string,
  attempt: string,
  token: bigint,
  holdMs: number,
  logger?: (e: FencedEvent) => void,
): Promise<Outcome> {
  const guard = createPostgresGuard({ db: schema.pool, resource, schema: schema.name, ...(logger ? { logger } : {}) });
  try {
    await guard.guardedWrite(token, async (client: pg.PoolClient) => {
      await client.query(`INSERT INTO ledger (attempt, resource, token) VALUES ($1, $2, $3)`, [attempt, resource, token.toString()]);
      if (holdMs > 0) await sleep(holdMs);
    });
    return { attempt, token, result: 'accepted' };
  } catch (error) {
    return { attempt, token, result: isFencedError(error, 'STALE_TOKEN') ? 'stale' : 'other', error };
  }
}

/** Checks the promise on `resource` against the ledger and the outcomes the callers saw. */
async function checkInvariant(resource: string, outcomes: Outcome[]): Promise<void> {
  const unexpected = outcomes.filter((o) => o.result === 'other');
  expect(unexpected.map((o) => String(o.error))).toEqual([]);

  const { rows } = await schema.pool.query(
    `SELECT attempt, token::text AS token, commit_seq FROM ledger WHERE resource = $1 ORDER BY commit_seq`,
    [resource],
  );
  // Committed rows, in commit order, never go down in token.
  for (let i = 1; i < rows.length; i++) {
    expect(BigInt(rows[i].token), `commit ${i} went down in token`).toBeGreaterThanOrEqual(BigInt(rows[i - 1].token));
  }
  // Exactly the accepted writes left rows; no refused write did.
  const committed = new Set(rows.map((r) => r.attempt as string));
  for (const o of outcomes) expect(committed.has(o.attempt), `${o.attempt} (${o.result})`).toBe(o.result === 'accepted');
  // The fence equals the highest committed token (writes are the only thing that raised it here).
  const fence = await createPostgresGuard({ db: schema.pool, resource, schema: schema.name }).highest();
  const highestCommitted = rows.reduce((max, r) => (BigInt(r.token) > max ? BigInt(r.token) : max), 0n);
  expect(fence).toBe(rows.length === 0 ? null : highestCommitted);
}

describe('concurrent writers on one resource', () => {
  it('16 writers with random tokens: commits never go down in token, refused writes leave nothing', async () => {
    const resource = 'random-16';
    const outcomes = await Promise.all(
      Array.from({ length: 16 }, async (_, i) => {
        const results: Outcome[] = [];
        for (let round = 0; round < 12; round++) {
          const token = BigInt(1 + Math.floor(Math.random() * 40));
          await sleep(Math.random() * 5);
          results.push(await write(resource, `w${i}-${round}`, token, Math.random() < 0.3 ? Math.random() * 10 : 0));
        }
        return results;
      }),
    );
    const flat = outcomes.flat();
    await checkInvariant(resource, flat);
    // The run must exercise both sides of the guard, or it proves nothing.
    expect(flat.some((o) => o.result === 'accepted')).toBe(true);
    expect(flat.some((o) => o.result === 'stale')).toBe(true);
  });

  it('concurrent raises never surface a deadlock: every write is accepted or refused as stale', async () => {
    const resource = 'raisers';
    const events: FencedEvent[] = [];
    const base = await write(resource, 'raise-base', 1n, 0);
    // Each raiser holds its transaction open a while, so raises queue behind share locks and each other.
    const outcomes = await Promise.all(
      Array.from({ length: 16 }, (_, i) => write(resource, `raise-${i}`, BigInt(100 + ((i * 7) % 16)), 5 + (i % 4) * 5, (e) => events.push(e))),
    );
    await checkInvariant(resource, [base, ...outcomes]);
    expect(outcomes.some((o) => o.result === 'stale')).toBe(true);
    expect(events.filter((e) => e.type === 'guard.retry')).toEqual([]);
  });

  it('a deadlock the database breaks is retried inside the guard, not thrown at the caller', async () => {
    const events: FencedEvent[] = [];
    const guard = createPostgresGuard({ db: schema.pool, resource: 'deadlock', schema: schema.name, logger: (e) => events.push(e) });
    // Two transactions lock the same two rows in opposite orders: PostgreSQL aborts one of them. On
    // their first attempt both wait until each holds its first row, so the deadlock is certain
    // whatever the machine's speed; a retry goes straight through (it may still deadlock again under
    // load, which the guard must absorb too).
    await guard.guardedWrite(1n, async () => undefined); // the fence exists, so both writers share it
    let holding = 0;
    let bothHold!: () => void;
    const barrier = new Promise<void>((r) => (bothHold = r));
    const lockBoth = (first: number, second: number) =>
      guard.guardedWrite(1n, async (client: pg.PoolClient, ctx) => {
        await client.query(`UPDATE hot_rows SET n = n + 1 WHERE id = $1`, [first]);
        if (ctx.attempt === 1) {
          if (++holding === 2) bothHold();
          await barrier;
        }
        await client.query(`UPDATE hot_rows SET n = n + 1 WHERE id = $1`, [second]);
        return ctx.attempt;
      });
    const attempts = await Promise.all([lockBoth(1, 2), lockBoth(2, 1)]);
    // Both calls succeeded; at least one of them needed a retry, and every retry was a deadlock.
    expect(Math.max(...attempts)).toBeGreaterThanOrEqual(2);
    const retries = events.filter((e) => e.type === 'guard.retry').map((e) => (e as { sqlstate: string }).sqlstate);
    expect(retries.length).toBeGreaterThanOrEqual(1);
    expect(new Set(retries)).toEqual(new Set(['40P01']));
    const { rows } = await schema.pool.query(`SELECT n FROM hot_rows ORDER BY id`);
    expect(rows.map((r) => r.n)).toEqual([2, 2]); // each transaction took effect exactly once
  });

  it('SERIALIZABLE callers see serialization failures retried the same way', async () => {
    const events: FencedEvent[] = [];
    const resource = 'serializable';
    const guard = createPostgresGuard({
      db: schema.pool,
      resource,
      schema: schema.name,
      isolationLevel: 'serializable',
      logger: (e) => events.push(e),
    });
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        guard
          .guardedWrite(BigInt(1 + (i % 3)), async (client: pg.PoolClient, ctx) => {
            await client.query(`INSERT INTO ledger (attempt, resource, token) VALUES ($1, $2, $3)`, [`ser-${i}-${ctx.attempt}`, resource, ctx.token.toString()]);
            await sleep(HOLD_OPEN_MS); // overlap with the others, so that serialization failures happen
          })
          .then(
            () => 'accepted',
            (err: unknown) => (isFencedError(err, 'STALE_TOKEN') ? 'stale' : String(err)),
          ),
      ),
    );
    expect(outcomes.filter((o) => o !== 'accepted' && o !== 'stale')).toEqual([]);
    const { rows } = await schema.pool.query(`SELECT token::text AS token FROM ledger WHERE resource = $1 ORDER BY commit_seq`, [resource]);
    for (let i = 1; i < rows.length; i++) expect(BigInt(rows[i].token)).toBeGreaterThanOrEqual(BigInt(rows[i - 1].token));
  });
});

describe('the ledger check can fail', () => {
  // A check that reads the fence without holding a lock until commit is the classic mistake. Swap
  // it in for a throwaway installation and replay the race it loses: the ledger must show the damage,
  // or the invariant tests above prove nothing.
  it('catches a guard whose check does not hold its lock to commit, and the real guard blocks the race', async () => {
    const table = 'broken_fences';
    const broken = createPostgresGuard({ db: schema.pool, resource: 'race', schema: schema.name, table });
    await broken.migrate();
    await schema.pool.query(`
      CREATE OR REPLACE FUNCTION "${schema.name}"."${table}_check"(p_resource text, p_token bigint, p_expect_raise boolean, p_fire_id text DEFAULT NULL)
      RETURNS void LANGUAGE plpgsql AS $$
      DECLARE cur bigint;
      BEGIN
        SELECT token INTO cur FROM "${schema.name}"."${table}" WHERE resource = p_resource; -- no lock
        IF cur > p_token THEN RAISE EXCEPTION USING ERRCODE = 'FN001', DETAIL = cur::text; END IF;
        IF cur IS NULL THEN
          INSERT INTO "${schema.name}"."${table}" (resource, token) VALUES (p_resource, p_token);
        ELSIF cur < p_token THEN
          UPDATE "${schema.name}"."${table}" SET token = p_token WHERE resource = p_resource;
        END IF;
      END $$`);

    const race = async (guard: typeof broken, resource: string) => {
      await guard.guardedWrite(1n, async () => undefined, { resource });
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let entered!: () => void;
      const inside = new Promise<void>((r) => (entered = r));
      const low = guard.guardedWrite(
        1n,
        async (client: pg.PoolClient) => {
          entered();
          await held;
          await client.query(`INSERT INTO ledger (attempt, resource, token) VALUES ($1, $2, 1)`, [`${resource}-low`, resource]);
        },
        { resource },
      );
      await inside;
      const high = guard.guardedWrite(
        2n,
        (client: pg.PoolClient) => client.query(`INSERT INTO ledger (attempt, resource, token) VALUES ($1, $2, 2)`, [`${resource}-high`, resource]),
        { resource },
      );
      // Release the low write only once the high one has either committed (a guard that lets it
      // through) or is blocked on the fence row (a guard that makes it wait): no timing guess.
      await Promise.race([high.then(() => undefined), waitForLockWait(schema.pool, schema.name)]);
      release();
      await Promise.all([low, high]);
      const { rows } = await schema.pool.query(`SELECT token::int AS token FROM ledger WHERE resource = $1 ORDER BY commit_seq`, [resource]);
      return rows.map((r) => r.token as number);
    };

    // Broken: the high write commits while the low one is still open, then the low one commits after it.
    expect(await race(broken, 'race-broken')).toEqual([2, 1]);
    // Real guard: the raise waits for the open low-token transaction, so commits stay in token order.
    const real = createPostgresGuard({ db: schema.pool, resource: 'race', schema: schema.name });
    expect(await race(real, 'race-real')).toEqual([1, 2]);
  });
});

describe('property: any interleaving of writes and raises keeps the promise', () => {
  const op = fc.record({
    kind: fc.constantFrom('write', 'write', 'write', 'advance'),
    token: fc.bigInt({ min: 1n, max: 12n }),
    startMs: fc.integer({ min: 0, max: 15 }),
    holdMs: fc.integer({ min: 0, max: 15 }),
  });

  it('holds for generated schedules', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 2, maxLength: 14 }), async (ops) => {
        const resource = `prop-${++run}-${Math.random().toString(36).slice(2)}`;
        const guard = createPostgresGuard({ db: schema.pool, resource, schema: schema.name });
        const advanced: bigint[] = [];
        const outcomes = (
          await Promise.all(
            ops.map(async (o, i): Promise<Outcome | null> => {
              await sleep(o.startMs);
              if (o.kind === 'write') return write(resource, `${resource}-${i}`, o.token, o.holdMs);
              try {
                await guard.advance(o.token);
                advanced.push(o.token);
              } catch (err) {
                if (!isFencedError(err, 'FENCE_AHEAD')) throw err;
              }
              return null;
            }),
          )
        ).filter((o): o is Outcome => o !== null);

        expect(outcomes.filter((o) => o.result === 'other').map((o) => String(o.error))).toEqual([]);
        const { rows } = await schema.pool.query(
          `SELECT attempt, token::text AS token FROM ledger WHERE resource = $1 ORDER BY commit_seq`,
          [resource],
        );
        for (let i = 1; i < rows.length; i++) expect(BigInt(rows[i].token)).toBeGreaterThanOrEqual(BigInt(rows[i - 1].token));
        const committed = new Set(rows.map((r) => r.attempt as string));
        for (const o of outcomes) expect(committed.has(o.attempt)).toBe(o.result === 'accepted');
        // The fence is the highest of everything that took effect: committed writes and advances.
        const all = [...rows.map((r) => BigInt(r.token)), ...advanced];
        const expected = all.length === 0 ? null : all.reduce((a, b) => (b > a ? b : a));
        expect(await guard.highest()).toBe(expected);
      }),
      { numRuns: 25 },
    );
  });
});
