// The election-time advance takes over from a deposed leader's transaction that blocks it, and from
// nothing else: each case against the real PostgreSQL, the advance's own promise (takeover.ts).
import { isFencedError, type FencedEvent } from '@fenced/shared';
import { createPool, createTestSchema, testDatabaseUrl, waitFor, waitForLockWait } from '#test-support';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresGuard } from './index.js';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let admin: pg.Pool;
beforeAll(async () => {
  schema = await createTestSchema('takeover');
  admin = createPool({ max: 4 });
  await schema.pool.query(`CREATE TABLE ledger (id text PRIMARY KEY, token bigint NOT NULL)`);
  await createPostgresGuard({ db: schema.pool, resource: 'setup', schema: schema.name }).migrate();
});
afterAll(async () => {
  await admin.end();
  await schema.drop();
});

let counter = 0;
function setup(takeover: { graceMs: number; timeoutMs: number } = { graceMs: 50, timeoutMs: 10_000 }) {
  const resource = `takeover-${++counter}`;
  const events: FencedEvent[] = [];
  const guard = createPostgresGuard({ db: schema.pool, resource, schema: schema.name, takeover, logger: (e) => void events.push(e) });
  return { resource, guard, events };
}

/** A guarded write that holds its transaction open until `release()`: a leader frozen mid-write, in-process. */
function heldWrite(guard: ReturnType<typeof setup>['guard'], token: bigint, id: string) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let pid = 0;
  const outcome = guard
    .guardedWrite(token, async (trx) => {
      const c = trx as pg.PoolClient;
      pid = Number((await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
      await c.query('INSERT INTO ledger (id, token) VALUES ($1, $2)', [id, token.toString()]);
      await gate;
    })
    .then(
      () => 'committed' as const,
      (err: unknown) => err,
    );
  return { release, outcome, pid: () => pid };
}

const rowExists = async (id: string) => (await admin.query(`SELECT 1 FROM "${schema.name}".ledger WHERE id = $1`, [id])).rowCount === 1;
const backendAlive = async (pid: number) => (await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rowCount === 1;

/** Resolves once the advance has waited on a lock for `ms` by the server's clock (not a sleep here). */
async function advanceWaitedFor(resource: string, ms: number): Promise<void> {
  await waitForLockWait(admin, '_advance');
  await waitFor(
    async () =>
      (
        await admin.query(
          `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND strpos(query, '_advance') > 0 AND now() - state_change > make_interval(secs => $1)`,
          [ms / 1000],
        )
      ).rowCount! > 0,
    20_000,
  );
  void resource;
}

describe('the election-time advance', () => {
  it('ends a blocking guarded transaction of a lower token after the grace period, and commits', async () => {
    const { resource, guard, events } = setup();
    await guard.guardedWrite(1n, async () => {});
    const held = heldWrite(guard, 1n, `${resource}-deposed`);
    await waitFor(() => held.pid() !== 0);
    await guard.advance(2n);
    expect(await guard.highest()).toBe(2n);
    expect(await backendAlive(held.pid())).toBe(false);
    // The deposed writer wakes up: its transaction is gone, and it says so with a typed error.
    held.release();
    const outcome = await held.outcome;
    expect(isFencedError(outcome, 'GUARD_UNAVAILABLE'), String(outcome)).toBe(true);
    expect(await rowExists(`${resource}-deposed`)).toBe(false);
    const takeovers = events.filter((e) => e.type === 'guard.takeover');
    expect(takeovers.length).toBeGreaterThanOrEqual(1);
    expect(takeovers[0]).toMatchObject({ resource, token: 2n, blockingToken: 1n, session: String(held.pid()), ended: true });
    // The pool is whole again: the killed client was discarded, not handed out.
    await Promise.all([1, 2, 3].map((i) => guard.guardedWrite(2n, (trx) => (trx as pg.PoolClient).query('INSERT INTO ledger (id, token) VALUES ($1, 2)', [`${resource}-after-${i}`]))));
  });

  it('never ends a live transaction of a higher token: it waits, then is refused by the fence it committed', async () => {
    const { resource, guard, events } = setup();
    await guard.guardedWrite(4n, async () => {});
    const newer = heldWrite(guard, 5n, `${resource}-newer`);
    await waitFor(() => newer.pid() !== 0);
    const advance = guard.advance(3n).then(
      () => 'advanced',
      (err: unknown) => err,
    );
    // Several grace periods pass with the advance waiting on the newer term's lock.
    await advanceWaitedFor(resource, 400);
    expect(await backendAlive(newer.pid())).toBe(true);
    newer.release();
    expect(await newer.outcome).toBe('committed');
    const refused = await advance;
    expect(isFencedError(refused, 'FENCE_AHEAD'), String(refused)).toBe(true);
    expect(events.filter((e) => e.type === 'guard.takeover')).toEqual([]);
    expect(await rowExists(`${resource}-newer`)).toBe(true);
  });

  it('never ends a session that is not a guarded write; it gives up at its timeout and the election fails closed', async () => {
    const { resource, guard, events } = setup({ graceMs: 50, timeoutMs: 600 });
    await guard.guardedWrite(1n, async () => {});
    const operator = await admin.connect();
    try {
      await operator.query('BEGIN');
      await operator.query(`SELECT 1 FROM "${schema.name}".fenced_fences WHERE resource = $1 FOR UPDATE`, [resource]);
      const refused = await guard.advance(2n).then(
        () => 'advanced',
        (err: unknown) => err,
      );
      expect(isFencedError(refused, 'GUARD_UNAVAILABLE'), String(refused)).toBe(true);
      // The operator's session is untouched and its transaction still usable.
      await operator.query('SELECT 1');
    } finally {
      await operator.query('ROLLBACK');
      operator.release();
    }
    expect(events.filter((e) => e.type === 'guard.takeover')).toEqual([]);
    expect(await guard.highest()).toBe(1n);
  });

  it('a blocker its role may not end (a superuser session) is reported once as not ended; the advance gives up at its timeout and the write goes on', async () => {
    // The guard connects as a role without pg_signal_backend; the deposed write runs as the superuser.
    const role = `fenced_takeover_${process.pid}_${++counter}`;
    await admin.query(`CREATE ROLE ${role} LOGIN`);
    await admin.query(`GRANT USAGE ON SCHEMA "${schema.name}" TO ${role}`);
    await admin.query(`GRANT ALL ON ALL TABLES IN SCHEMA "${schema.name}" TO ${role}`);
    await admin.query(`GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA "${schema.name}" TO ${role}`);
    const url = new URL(testDatabaseUrl());
    url.username = role;
    url.password = '';
    const rolePool = createPool({ connectionString: url.toString(), schema: schema.name, max: 2 });
    try {
      const { resource, guard: superGuard } = setup();
      const events: FencedEvent[] = [];
      const guard = createPostgresGuard({ db: rolePool, resource, schema: schema.name, takeover: { graceMs: 50, timeoutMs: 800 }, logger: (e) => void events.push(e) });
      await superGuard.guardedWrite(1n, async () => {});
      const held = heldWrite(superGuard, 1n, `${resource}-held`);
      await waitFor(() => held.pid() !== 0);
      const refused = await guard.advance(2n).then(
        () => 'advanced',
        (err: unknown) => err,
      );
      expect(isFencedError(refused, 'GUARD_UNAVAILABLE'), String(refused)).toBe(true);
      expect(await backendAlive(held.pid())).toBe(true);
      // Found every grace period, reported once.
      expect(events.filter((e) => e.type === 'guard.takeover')).toEqual([expect.objectContaining({ resource, token: 2n, blockingToken: 1n, session: String(held.pid()), ended: false })]);
      held.release();
      expect(await held.outcome).toBe('committed');
      expect(await guard.highest()).toBe(1n);
    } finally {
      await rolePool.end();
      await admin.query(`DROP OWNED BY ${role}`);
      await admin.query(`DROP ROLE ${role}`);
    }
  });

  it('with takeover off, waits for the blocking transaction as long as it is held', async () => {
    const resource = `takeover-${++counter}`;
    const guard = createPostgresGuard({ db: schema.pool, resource, schema: schema.name, takeover: false });
    await guard.guardedWrite(1n, async () => {});
    const held = heldWrite(guard, 1n, `${resource}-held`);
    await waitFor(() => held.pid() !== 0);
    const advance = guard.advance(2n);
    await advanceWaitedFor(resource, 400);
    expect(await backendAlive(held.pid())).toBe(true);
    held.release();
    expect(await held.outcome).toBe('committed');
    await advance;
    expect(await guard.highest()).toBe(2n);
  });

  it('a guarded transaction announces its token for itself alone; the session keeps its own name after', async () => {
    const { guard } = setup();
    const name = await guard.guardedWrite(7n, async (trx) => (await (trx as pg.PoolClient).query(`SELECT current_setting('application_name') AS n`)).rows[0].n as string);
    expect(name).toMatch(/^fenced:7 /);
    const client = await schema.pool.connect();
    try {
      expect((await client.query(`SELECT current_setting('application_name') AS n`)).rows[0].n).not.toMatch(/^fenced:/);
    } finally {
      client.release();
    }
  });
});
