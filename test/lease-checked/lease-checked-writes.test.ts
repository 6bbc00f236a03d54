// Lease-checked writes on PostgreSQL, what is PostgreSQL's own beyond the conformance suite every
// store pair passes (test/lease-checked/): a lossy failover's token minted again for another node,
// the takeover's announced tokens, a takeover that runs out of time.
import { createEnvelope, isFencedError, type FencedEvent } from '@fenced/shared';
import { createGuard } from '@fenced/consumer-guard';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { postgresLeases } from '@fenced/coordinator/postgres';
import { createTestSchema, waitFor } from '#test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frozenWrite, type LeaseCheckedGuard } from './conformance.js';

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

describe('lease-checked writes', () => {
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
    const { write: frozen, wake } = await frozenWrite(guard as unknown as LeaseCheckedGuard, won.token, insert as (token: bigint) => (connection: never) => Promise<unknown>);
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
