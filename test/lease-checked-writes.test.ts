// Lease-checked writes: with the lease in the guarded database, a write commits only while its token
// holds its lease, checked in the write's own transaction under a lock an election waits for. Each
// promise tested at its own layer: the guard's check, the store's election, the takeover bound.
import { createEnvelope, isFencedError, parseToken, type FencedEvent, type Token } from '@fenced/shared';
import { createGuard } from '@fenced/consumer-guard';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { postgresLeases } from '@fenced/coordinator/postgres';
import { createTestSchema, waitFor } from '#test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let n = 0;

beforeAll(async () => {
  schema = await createTestSchema('leasechecked');
  await createPostgresGuard({ db: schema.pool, resource: 'setup', schema: schema.name }).migrate();
  await postgresLeases({ pool: schema.pool, schema: schema.name }).migrate();
  await schema.pool.query('CREATE TABLE effects (id serial PRIMARY KEY, token bigint NOT NULL)');
});
afterAll(async () => {
  await schema.drop();
});

/** A lease of its own, the store opened for two nodes, and a lease-checked guard on a resource of its own. */
function setup(takeover = { graceMs: 250, timeoutMs: 10_000 }) {
  const lease = `lc-${++n}`;
  const leases = postgresLeases({ pool: schema.pool, schema: schema.name, takeover });
  const events: FencedEvent[] = [];
  const guard = createPostgresGuard({ db: schema.pool, resource: `res-${n}`, schema: schema.name, checkLease: lease, logger: (e) => events.push(e) });
  return { lease, a: leases.openLease(lease, 'a', 15_000), b: leases.openLease(lease, 'b', 15_000), guard, events };
}

const insert = (token: bigint) => (client: unknown) => (client as { query(t: string, v: unknown[]): Promise<unknown> }).query('INSERT INTO effects (token) VALUES ($1)', [token]);
const rows = async (token: bigint) => Number(((await schema.pool.query('SELECT count(*)::int AS n FROM effects WHERE token = $1', [token])).rows[0] as { n: number }).n);

/**
 * A lease-checked write that freezes inside its transaction once its row is in (its process stops
 * there); it comes back when `wake()` is called. Resolves once the write holds its locks.
 */
async function frozenWrite(guard: ReturnType<typeof setup>['guard'], token: Token) {
  let checked = false;
  let wake!: () => void;
  const write = guard.guardedWrite(token, async (client) => {
    await insert(token)(client);
    checked = true;
    await new Promise<void>((resolve) => (wake = resolve));
  });
  write.catch(() => undefined); // awaited by the test, after wake()
  await waitFor(() => checked, 5000);
  return { write, wake: () => wake() };
}

describe('lease-checked writes', () => {
  it('commit while the token holds its lease; are refused, with nothing applied, once the lease expired, before any other term has begun', async () => {
    const { lease, a, guard, events } = setup();
    const won = await a.acquire(300, 5000);
    if (!won.won) throw new Error('not granted');
    await guard.guardedWrite(won.token, insert(won.token));
    expect(await rows(won.token)).toBe(1);
    // Nobody else leads, the fence still holds this very token: only the lease can refuse now.
    await waitFor(async () => ((await schema.pool.query(`SELECT expires_at <= clock_timestamp() AS over FROM "${schema.name}"."fenced_fences_leases" WHERE name = $1`, [lease])).rows[0] as { over: boolean }).over, 5000, 20);
    let error: unknown;
    await guard.guardedWrite(won.token, insert(won.token)).catch((err: unknown) => (error = err));
    expect(isFencedError(error, 'NOT_LEADER')).toBe(true);
    expect(await rows(won.token)).toBe(1);
    expect(events).toContainEqual(expect.objectContaining({ type: 'guard.lease-refused', lease, token: won.token }));
  });

  it('judge expiry when the check runs, also inside a transaction the caller opened while the lease still lived (guardedWriteIn)', async () => {
    const { lease, a, guard } = setup();
    const won = await a.acquire(400, 5000);
    if (!won.won) throw new Error('not granted');
    const client = await schema.pool.connect();
    try {
      // The caller's transaction began, and took its snapshot, while the lease lived: its now() is
      // that moment, and a plain read in it would still see the lease live.
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await client.query(`SELECT expires_at FROM "${schema.name}"."fenced_fences_leases" WHERE name = $1`, [lease]);
      await waitFor(async () => ((await schema.pool.query(`SELECT expires_at <= clock_timestamp() AS over FROM "${schema.name}"."fenced_fences_leases" WHERE name = $1`, [lease])).rows[0] as { over: boolean }).over, 5000, 20);
      const tx = { executeSql: async (text: string, values?: unknown[]) => client.query(text, values) };
      const error = await guard.guardedWriteIn(tx, won.token, (t) => t.executeSql('INSERT INTO effects (token) VALUES ($1)', [won.token.toString()])).catch((err: unknown) => err);
      expect(isFencedError(error, 'NOT_LEADER')).toBe(true);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    expect(await rows(won.token)).toBe(0);
  });

  it('refuse a token that never held the lease, and a term that was released', async () => {
    const { a, guard } = setup();
    const won = await a.acquire(10_000, 5000);
    if (!won.won) throw new Error('not granted');
    let error: unknown;
    await guard.guardedWrite(parseToken(won.token + 1n), insert(won.token + 1n)).catch((err: unknown) => (error = err));
    expect(isFencedError(error, 'NOT_LEADER')).toBe(true);
    expect(await a.release(won.leaseValue, 5000)).toBe(true);
    error = undefined;
    await guard.guardedWrite(won.token, insert(won.token)).catch((err: unknown) => (error = err));
    expect(isFencedError(error, 'NOT_LEADER')).toBe(true);
  });

  it('compare the holder too when the write names its issuer: a token minted again for another node (a lossy failover) is refused for the node that lost it', async () => {
    const { lease, a, guard } = setup();
    const won = await a.acquire(10_000, 5000);
    if (!won.won) throw new Error('not granted');
    await guard.guardedWrite(won.token, insert(won.token), { issuer: 'a' });
    // What a promoted asynchronous standby that never saw this grant does: it grants the same token
    // again, to b (the row as its own grant would leave it).
    await schema.pool.query(`UPDATE "${schema.name}"."fenced_fences_leases" SET holder = $2 WHERE name = $1`, [lease, 'b']);
    let error: unknown;
    await guard.guardedWrite(won.token, insert(won.token), { issuer: 'a' }).catch((err: unknown) => (error = err));
    expect(isFencedError(error, 'NOT_LEADER')).toBe(true);
    // Through the handler wrapper, the envelope's issuer is the one checked.
    const handle = createGuard({ db: schema.pool, resource: guard.resource, schema: schema.name, checkLease: lease }).wrapHandler(async (_payload, ctx) => ctx.guardedWrite(insert(won.token)));
    const envelope = (issuer: string) => createEnvelope({ job: `job-${lease}-${issuer}`, scheduledAt: Date.now(), token: won.token, issuer, payload: null });
    error = undefined;
    await handle(envelope('a')).catch((err: unknown) => (error = err));
    expect(isFencedError(error, 'NOT_LEADER')).toBe(true);
    expect(await rows(won.token)).toBe(1);
    await handle(envelope('b'));
    await guard.guardedWrite(won.token, insert(won.token), { issuer: 'b' });
    expect(await rows(won.token)).toBe(3);
    // Bad input is typed, and nothing is written.
    error = undefined;
    await guard.guardedWrite(won.token, insert(won.token), { issuer: '' }).catch((err: unknown) => (error = err));
    expect(isFencedError(error, 'INVALID_ENVELOPE')).toBe(true);
    expect(await rows(won.token)).toBe(3);
  });

  it('a renew does not wait for open writes; an election waits until they end', async () => {
    const { a, b, guard } = setup({ graceMs: 20_000, timeoutMs: 30_000 });
    const won = await a.acquire(400, 5000);
    if (!won.won) throw new Error('not granted');
    const order: string[] = [];
    let finish!: () => void;
    const open = new Promise<void>((resolve) => (finish = resolve));
    const writing = guard.guardedWrite(won.token, async (client) => {
      order.push('write checked');
      await insert(won.token)(client);
      await open;
    });
    await waitFor(() => order.includes('write checked'), 5000);
    // The lease row is held FOR KEY SHARE by the open write: a renew still goes through at once.
    expect((await a.renew(won.leaseValue, 400, () => 5000)).renewed).toBe(true);
    order.push('renewed');
    // Let the lease run out with the write still open: an election must wait for the write.
    const election = (async () => {
      let reply = await b.acquire(10_000, 40_000);
      await waitFor(async () => reply.won || (reply = await b.acquire(10_000, 40_000)).won, 30_000, 20);
      if (!reply.won) throw new Error('not granted');
      return reply;
    })().then((reply) => {
      order.push('elected');
      return reply;
    });
    await waitFor(async () => ((await schema.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%lease_acquire%'`)).rows[0] as { n: number }).n > 0, 10_000);
    expect(order).not.toContain('elected');
    order.push('write committing');
    finish();
    await writing;
    const next = await election;
    expect(order).toEqual(['write checked', 'renewed', 'write committing', 'elected']);
    expect(next.token).toBeGreaterThan(won.token);
    expect(await rows(won.token)).toBe(1);
  });

  it('an election ends a frozen write of the expired term after its grace period, and the write applies nothing', async () => {
    const { a, b, guard } = setup({ graceMs: 200, timeoutMs: 10_000 });
    const won = await a.acquire(300, 5000);
    if (!won.won) throw new Error('not granted');
    // Frozen inside its transaction: its process comes back only after the next term has begun.
    const { write: frozen, wake } = await frozenWrite(guard, won.token);
    const startedAt = performance.now();
    let reply = await b.acquire(10_000, 15_000);
    await waitFor(async () => reply.won || (reply = await b.acquire(10_000, 15_000)).won, 10_000, 20);
    // Within the TTL's remainder, a grace period and the termination, with room for a loaded machine.
    expect(performance.now() - startedAt).toBeLessThan(300 + 200 + 3000);
    expect(reply.endedWrites).toBeGreaterThanOrEqual(1);
    wake();
    const error = await frozen.then(() => undefined, (err: unknown) => err);
    expect(isFencedError(error, 'GUARD_UNAVAILABLE')).toBe(true);
    expect(await rows(won.token)).toBe(0);
  });

  it("an election never ends a write of the live term: a standby's retries do not even queue behind it", async () => {
    const { a, b, guard } = setup({ graceMs: 50, timeoutMs: 1000 });
    const won = await a.acquire(10_000, 5000);
    if (!won.won) throw new Error('not granted');
    let finish!: () => void;
    let checked = false;
    const writing = guard.guardedWrite(won.token, async (client) => {
      await insert(won.token)(client);
      checked = true;
      await new Promise<void>((resolve) => (finish = resolve));
    });
    await waitFor(() => checked, 5000);
    for (let i = 0; i < 5; i++) expect((await b.acquire(10_000, 2000)).won).toBe(false);
    finish();
    await writing;
    expect(await rows(won.token)).toBe(1);
  });

  it("an election's takeover ends only writes of the terms it saw expire, never one that announced a newer token", async () => {
    const { lease, a, b } = setup({ graceMs: 50, timeoutMs: 10_000 });
    const won = await a.acquire(200, 5000);
    if (!won.won) throw new Error('not granted');
    // A session that announced a newer term's token on this lease and holds its row (what a write of
    // the term elected just before this election would look like to it).
    const newer = await schema.pool.connect();
    newer.on('error', () => {});
    try {
      await newer.query('BEGIN');
      const tag = `lease:${(await newer.query('SELECT substr(md5($1), 1, 12) AS t', [lease])).rows[0].t as string}`;
      await newer.query(`SELECT set_config('application_name', $1, true)`, [`fenced:${won.token + 1n} ${tag} test`]);
      await newer.query(`SELECT 1 FROM "${schema.name}"."fenced_fences_leases" WHERE name = $1 FOR KEY SHARE`, [lease]);
      await waitFor(async () => ((await schema.pool.query(`SELECT expires_at <= clock_timestamp() AS over FROM "${schema.name}"."fenced_fences_leases" WHERE name = $1`, [lease])).rows[0] as { over: boolean }).over, 5000, 20);
      const election = b.acquire(10_000, 15_000);
      // Many grace periods pass with the election waiting: the newer session is still there.
      await waitFor(async () => ((await schema.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%lease_acquire%'`)).rows[0] as { n: number }).n > 0, 10_000);
      const waitingSince = performance.now();
      await waitFor(() => performance.now() - waitingSince > 500, 2000, 50);
      expect(((await newer.query('SELECT 1 AS alive')).rows[0] as { alive: number }).alive).toBe(1);
      await newer.query('COMMIT');
      const reply = await election;
      expect(reply.won).toBe(true);
      expect(reply.won && reply.endedWrites).toBe(0);
    } finally {
      newer.release(true);
    }
  });

  it('an election that runs out of time after ending a frozen write answers not granted, with what it ended, and the next one is granted', async () => {
    // A wait budget shorter than one grace period: the acquire ends the blocker, then gives up.
    const { a, b, guard } = setup({ graceMs: 1000, timeoutMs: 100 });
    const won = await a.acquire(200, 5000);
    if (!won.won) throw new Error('not granted');
    const { write: frozen, wake } = await frozenWrite(guard, won.token);
    const ended = (r: typeof reply) => r.won || (r.endedWrites ?? 0) > 0;
    let reply = await b.acquire(10_000, 5000);
    await waitFor(async () => ended(reply) || ended((reply = await b.acquire(10_000, 5000))), 10_000, 20);
    expect(reply).toMatchObject({ won: false, holder: null, remainingMs: 0, endedWrites: 1 });
    const next = await b.acquire(10_000, 5000);
    expect(next.won && next.token > won.token).toBe(true);
    wake();
    expect(isFencedError(await frozen.then(() => undefined, (err: unknown) => err), 'GUARD_UNAVAILABLE')).toBe(true);
  });
});
