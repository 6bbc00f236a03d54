/**
 * The MySQL lease store's procedures at their edges, called as the store calls them (the statements
 * of mysql-grant.ts, mysql-backend.ts, mysql-fire-log.ts and mysql-membership.ts) on sessions the
 * test drives. Two things no test through the store's API can do:
 * - put a call on the very microsecond a lease or a member ends: a session's clock is pinned with
 *   `SET timestamp` (UTC_TIMESTAMP(6), which every procedure reads, follows it), and
 * - put a wait where a procedure promises to judge after it: another session holds the row the call
 *   needs, as a renew, a record or an election in flight holds it.
 * The boundary they all share: a lease granted at T for t ms is held while the server's clock is below
 * T + t and free from T + t on (a member alike); whatever the acquire judges free, the renew, the fire
 * record, the heartbeat and the guard's lease check beside them judge ended.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { MYSQL_NOW_US_SQL } from '@fenced/shared/internal';
import { createMysqlGuard } from '@fenced/consumer-guard/mysql';
import { mysqlLeases } from '@fenced/coordinator/mysql';
import { createMysqlPool, createTestMysqlDatabase, waitFor } from '#test-support';
import type { Pool, PoolConnection } from 'mysql2/promise';

type Row = Record<string, unknown>;

const ACQUIRE = 'CALL fenced_fences_lease_acquire(?, ?, ?, ?)';
const RENEW = 'CALL fenced_fences_lease_renew(?, ?)';
const RECORD_FIRES = 'CALL fenced_fences_record_fires(?, ?, ?, ?, ?)';
const RECORD_ELECTION = 'CALL fenced_fences_lease_elected(?, ?, ?, ?, ?, ?, ?)';
const BEAT = 'CALL fenced_fences_member_beat(?, ?, ?)';
/** The guard's lease check, which a lease-checked write calls in its own transaction (consumer-guard's MySQL migrations). */
const LEASE_CHECK = 'CALL fenced_fences_lease_check(?, ?, ?)';
/** The grant's wait for a row lock in these tests, in seconds (the store passes its takeover budget). */
const WAIT_S = 10;
/** A microsecond clock far from today's, so no other session's clock is ever near it. */
const T = 1_900_000_000_000_000n;
const SECOND_US = 1_000_000n;

let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;
let pool: Pool;

beforeAll(async () => {
  db = await createTestMysqlDatabase('lease_proc');
  await createMysqlGuard({ db: db.pool, resource: 'setup' }).migrate();
  await mysqlLeases({ pool: db.pool }).migrate();
  pool = createMysqlPool({ database: db.name, connectionLimit: 12 });
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

type Session = PoolConnection & { readonly thread: number };

/** A session of its own and its thread id, closed when the test ends (with its pinned clock and whatever it holds open). */
async function session(): Promise<Session> {
  const connection = await pool.getConnection();
  onTestFinished(() => connection.destroy());
  const thread = Number(((await connection.query('SELECT CONNECTION_ID() AS id'))[0] as Row[])[0]!['id']);
  return Object.assign(connection, { thread });
}

/** The rows of a procedure's result set. */
async function call(connection: PoolConnection, sql: string, values: unknown[]): Promise<Row[]> {
  const [sets] = await connection.query(sql, values);
  return (sets as unknown[])[0] as Row[];
}

/** Pins the session's clock to `us` microseconds after the epoch, to the microsecond. */
async function pin(connection: PoolConnection, us: bigint): Promise<void> {
  await connection.query(`SET timestamp = ${us / SECOND_US}.${(us % SECOND_US).toString().padStart(6, '0')}`);
}

/** Milliseconds the statement `thread` runs has been running (0 when it runs none). */
async function runningMs(thread: number): Promise<number> {
  const [rows] = await pool.query(`SELECT TIME_MS AS ms FROM information_schema.PROCESSLIST WHERE ID = ? AND COMMAND = 'Query'`, [thread]);
  return Number((rows as Row[])[0]?.['ms'] ?? 0);
}

/** A call in flight on a session of its own: whether it settled, and its value or error. */
interface Tracked<T> {
  readonly session: Session;
  readonly done: () => boolean;
  readonly result: Promise<{ value?: T; error?: unknown }>;
}

/**
 * Starts `run` on a session of its own (after `prepare`) and returns once its statement has run `ms`
 * (it waits for a lock: these calls take a millisecond when they do not wait) or it settled.
 */
async function waiting<T>(run: (s: Session) => Promise<T>, options: { readonly prepare?: (s: Session) => Promise<unknown>; readonly ms?: number } = {}): Promise<Tracked<T>> {
  const s = await session();
  await options.prepare?.(s);
  let done = false;
  const result = run(s).then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  void result.then(() => (done = true));
  await waitFor(async () => done || (await runningMs(s.thread)) > (options.ms ?? 100), 30_000, 20);
  return { session: s, done: () => done, result };
}

/** A session of its own that holds what `sql` locks, in a transaction left open for the test to end. */
async function holding(sql: string, values: unknown[]): Promise<Session> {
  const holder = await session();
  await holder.beginTransaction();
  await holder.query(sql, values);
  return holder;
}

const serverNowUs = async () => BigInt(((await pool.query(`SELECT CAST(${MYSQL_NOW_US_SQL} AS CHAR) AS now`))[0] as Row[])[0]!['now'] as string);
const expiresUs = async (lease: string) => BigInt(((await pool.query('SELECT CAST(expires_us AS CHAR) AS e FROM fenced_fences_leases WHERE name = ?', [lease]))[0] as Row[])[0]!['e'] as string);

/** Grants `lease` to `node` on `connection` (its clock as it is) and answers the token. */
async function grant(connection: PoolConnection, lease: string, node: string, ttlMs: number): Promise<string> {
  const [row] = await call(connection, ACQUIRE, [lease, node, ttlMs, WAIT_S]);
  expect(row).toMatchObject({ won: 1 });
  return String(row!['token']);
}

/**
 * A lease named from `prefix` granted to node-a for 1 s on a new session whose clock is pinned at T:
 * the opening of every test at the microsecond a lease ends. Answers the lease, the session and the token.
 */
async function pinnedGrant(prefix: string): Promise<{ lease: string; s: Session; token: string }> {
  const lease = unique(prefix);
  const s = await session();
  await pin(s, T);
  return { lease, s, token: await grant(s, lease, 'node-a', 1000) };
}

const renewed = async (connection: PoolConnection, lease: string, token: string, node: string, ttlMs: number) =>
  Number((await call(connection, RENEW, [JSON.stringify([[lease, token, node]]), ttlMs]))[0]!['renewed']);

const members = async (connection: PoolConnection, group: string, member: string, ttlMs: number) =>
  Object.fromEntries((await call(connection, BEAT, [group, member, ttlMs])).map((row) => [String(row['member']), Number(row['left_us'])]));

describe('MySQL lease store procedures, at the microsecond a lease ends (a pinned session clock)', () => {
  it('acquire: a lease granted at T for t ms is held one microsecond before T + t (1 ms left) and granted to the next node at T + t', async () => {
    const { lease, s, token } = await pinnedGrant('edge-acquire');
    await pin(s, T + SECOND_US - 1n);
    expect((await call(s, ACQUIRE, [lease, 'node-b', 1000, WAIT_S]))[0]).toMatchObject({ won: 0, holder: `${token}:node-a`, remaining_ms: 1 });
    await pin(s, T + SECOND_US);
    const [row] = await call(s, ACQUIRE, [lease, 'node-b', 1000, WAIT_S]);
    expect(row).toMatchObject({ won: 1, token: String(BigInt(token) + 1n), holder: `${BigInt(token) + 1n}:node-b`, now_us: String(T + SECOND_US) });
  });

  it('renew: extends its lease one microsecond before the end, not at the end (where the acquire grants it)', async () => {
    const { lease, s, token } = await pinnedGrant('edge-renew');
    await pin(s, T + SECOND_US - 1n);
    expect(await renewed(s, lease, token, 'node-a', 1000)).toBe(1);
    // Now held until T + 2 s - 1 µs.
    await pin(s, T + 2n * SECOND_US - 1n);
    expect(await renewed(s, lease, token, 'node-a', 1000)).toBe(0);
    expect((await call(s, ACQUIRE, [lease, 'node-b', 1000, WAIT_S]))[0]).toMatchObject({ won: 1 });
  });

  it('record fires: records one microsecond before the lease ends, nothing at the end', async () => {
    const { lease, s, token } = await pinnedGrant('edge-record');
    await pin(s, T + SECOND_US - 1n);
    expect((await call(s, RECORD_FIRES, [lease, token, 'node-a', null, JSON.stringify([['invoices', 1_000, 1_001]])]))[0]).toMatchObject({ recorded: 1 });
    await pin(s, T + SECOND_US);
    expect((await call(s, RECORD_FIRES, [lease, token, 'node-a', null, JSON.stringify([['invoices', 2_000, 2_001]])]))[0]).toMatchObject({ recorded: 0 });
    const [rows] = await pool.query('SELECT CAST(value AS CHAR) AS v FROM fenced_fences_fires WHERE lease = ? AND field = ?', [lease, 'invoices']);
    expect(rows).toEqual([{ v: '1000' }]);
  });

  it('heartbeat: a member is live one microsecond before its TTL ends (1 µs left) and off the list at the end', async () => {
    const group = unique('edge-group');
    const s = await session();
    await pin(s, T);
    expect(await members(s, group, 'member-a', 1000)).toEqual({ 'member-a': 1_000_000 });
    await pin(s, T + SECOND_US - 1n);
    expect(await members(s, group, 'member-b', 1000)).toEqual({ 'member-a': 1, 'member-b': 1_000_000 });
    await pin(s, T + SECOND_US);
    expect(await members(s, group, 'member-b', 1000)).toEqual({ 'member-b': 1_000_000 });
  });

  it("the guard's lease check (a lease-checked write) passes one microsecond before the lease ends and refuses at the end, with the term's token", async () => {
    const { lease, s, token } = await pinnedGrant('edge-check');
    await pin(s, T + SECOND_US - 1n);
    await s.beginTransaction();
    await s.query(LEASE_CHECK, [lease, token, 'node-a']);
    await s.rollback();
    await pin(s, T + SECOND_US);
    await s.beginTransaction();
    await expect(s.query(LEASE_CHECK, [lease, token, 'node-a'])).rejects.toMatchObject({ errno: 45004, sqlMessage: token });
    await s.rollback();
  });

  it('takes a TTL of 1 ms, and refuses 0 with SQLSTATE 22023, changing nothing (acquire, renew, heartbeat)', async () => {
    const lease = unique('ttl');
    const group = unique('ttl-group');
    const s = await session();
    await pin(s, T);
    await expect(call(s, ACQUIRE, [lease, 'node-a', 0, WAIT_S])).rejects.toMatchObject({ sqlState: '22023' });
    expect((await pool.query('SELECT 1 FROM fenced_fences_leases WHERE name = ?', [lease]))[0]).toEqual([]);
    const token = await grant(s, lease, 'node-a', 1);
    await expect(call(s, RENEW, [JSON.stringify([[lease, token, 'node-a']]), 0])).rejects.toMatchObject({ sqlState: '22023' });
    expect(await expiresUs(lease)).toBe(T + 1000n);
    expect(await renewed(s, lease, token, 'node-a', 1)).toBe(1);
    await expect(call(s, BEAT, [group, 'member-a', 0])).rejects.toMatchObject({ sqlState: '22023' });
    expect(await members(s, group, 'member-a', 1)).toEqual({ 'member-a': 1000 });
  });
});

describe('MySQL lease store procedures, judging after a wait (another session holds the row)', () => {
  it('the grant waits for a row lock as long as it is told (whole seconds, beyond InnoDB’s 1 s floor), then grants, and puts the session’s own lock wait back', async () => {
    const lease = unique('wait');
    const s = await session();
    const token = await grant(s, lease, 'node-a', 60_000);
    expect((await call(s, 'CALL fenced_fences_lease_release(?, ?, ?)', [lease, token, 'node-a']))[0]).toMatchObject({ released: 1 });
    // A lease-checked write of the ended term, still open, holds the term row in share mode.
    const writer = await holding('SELECT token FROM fenced_fences_lease_terms WHERE name = ? LOCK IN SHARE MODE', [lease]);
    const granting = await waiting((acquirer) => call(acquirer, ACQUIRE, [lease, 'node-b', 1000, WAIT_S]), {
      prepare: (acquirer) => acquirer.query('SET SESSION innodb_lock_wait_timeout = 7'),
      ms: 1_500,
    });
    await writer.commit();
    expect((await granting.result).value?.[0]).toMatchObject({ won: 1, holder: `${BigInt(token) + 1n}:node-b` });
    expect(((await granting.session.query('SELECT @@SESSION.innodb_lock_wait_timeout AS w'))[0] as Row[])[0]).toEqual({ w: 7 });
  });

  it('renew: a lease that ran out while the renew waited for its row is not renewed', async () => {
    const lease = unique('renew-wait');
    const s = await session();
    // Long enough that the renew is waiting well before the lease ends; on a machine starved for
    // longer, it arrives after the end and the test asks no more of it (the answer is the same).
    const token = await grant(s, lease, 'node-a', 2_000);
    const holder = await holding('SELECT token FROM fenced_fences_leases WHERE name = ? FOR UPDATE', [lease]);
    const renewing = await waiting((renewer) => renewed(renewer, lease, token, 'node-a', 60_000));
    const end = await expiresUs(lease);
    await waitFor(async () => (await serverNowUs()) > end, 30_000, 20);
    await holder.commit();
    expect(await renewing.result).toEqual({ value: 0 });
    expect(await expiresUs(lease)).toBe(end);
  });

  it('renew: two renews of one lease that meet both go through (a retried batch beside the next tick), no deadlock', async () => {
    const lease = unique('renew-meet');
    const token = await grant(await session(), lease, 'node-a', 60_000);
    const holder = await holding('SELECT token FROM fenced_fences_leases WHERE name = ? FOR UPDATE', [lease]);
    const renewing = [await waiting((r) => renewed(r, lease, token, 'node-a', 60_000)), await waiting((r) => renewed(r, lease, token, 'node-a', 60_000))];
    await holder.commit();
    expect(await Promise.all(renewing.map((r) => r.result))).toEqual([{ value: 1 }, { value: 1 }]);
  });

  it('heartbeat: a member whose TTL ran out while the beat waited for the group is off the list it answers', async () => {
    const group = unique('beat-wait');
    // As for the renew above: a beat that arrives after member-a's end asks no more of the test.
    expect(Object.keys(await members(await session(), group, 'member-a', 2_000))).toEqual(['member-a']);
    const holder = await holding('SELECT member FROM fenced_fences_members WHERE grp = ? FOR UPDATE', [group]);
    const beating = await waiting((beater) => members(beater, group, 'member-b', 60_000));
    const [rows] = await pool.query('SELECT CAST(expires_us AS CHAR) AS e FROM fenced_fences_members WHERE grp = ?', [group]);
    const end = BigInt((rows as Row[])[0]!['e'] as string);
    await waitFor(async () => (await serverNowUs()) > end, 30_000, 20);
    await holder.commit();
    expect(Object.keys((await beating.result).value ?? {})).toEqual(['member-b']);
  });

  it('heartbeat: two beats of one group that meet both go through, no deadlock', async () => {
    const group = unique('beat-meet');
    await members(await session(), group, 'member-a', 60_000);
    const holder = await holding('SELECT member FROM fenced_fences_members WHERE grp = ? FOR UPDATE', [group]);
    const beating = [await waiting((b) => members(b, group, 'member-b', 60_000)), await waiting((c) => members(c, group, 'member-c', 60_000))];
    await holder.commit();
    const lists = await Promise.all(beating.map((b) => b.result));
    expect(lists.map((l) => l.error)).toEqual([undefined, undefined]);
    expect(Object.keys({ ...lists[0]!.value, ...lists[1]!.value }).sort()).toEqual(['member-a', 'member-b', 'member-c']);
  });

  it('record fires: an election waits for a record of the term it ends that is between its check and its commit, and the record commits under its own term', async () => {
    const { lease, token } = await pinnedGrant('record-election');
    // Another writer of the fire log's row (uncommitted) holds the record between its check and its write.
    const blocker = await holding('INSERT INTO fenced_fences_fires (lease, field, value) VALUES (?, ?, ?)', [lease, 'invoices', 500]);
    const recording = await waiting((recorder) => call(recorder, RECORD_FIRES, [lease, token, 'node-a', null, JSON.stringify([['invoices', 1_000, 1_001]])]), {
      prepare: (recorder) => pin(recorder, T + SECOND_US / 2n),
    });
    // The lease ends: the next election comes, by a clock past the end.
    const granting = await waiting((acquirer) => call(acquirer, ACQUIRE, [lease, 'node-b', 1000, WAIT_S]), { prepare: (acquirer) => pin(acquirer, T + SECOND_US) });
    expect(granting.done()).toBe(false);
    await blocker.rollback();
    expect((await recording.result).value?.[0]).toMatchObject({ recorded: 1 });
    expect((await granting.result).value?.[0]).toMatchObject({ won: 1, holder: `${BigInt(token) + 1n}:node-b` });
  });

  for (const isolation of ['REPEATABLE READ', 'READ COMMITTED'] as const) {
    const underIsolation = (acquirer: Session) => acquirer.query(`SET SESSION TRANSACTION ISOLATION LEVEL ${isolation}`);

    it(`acquire under ${isolation}: an election of an expired lease and a late renew of its old term that queue on the lease row both answer (the election wins), no deadlock`, async () => {
      const lease = unique('acquire-late-renew');
      const token = await grant(await session(), lease, 'node-a', 1);
      await waitFor(async () => (await serverNowUs()) > (await expiresUs(lease)), 30_000, 5);
      const holder = await holding('SELECT token FROM fenced_fences_leases WHERE name = ? FOR UPDATE', [lease]);
      const granting = await waiting((acquirer) => call(acquirer, ACQUIRE, [lease, 'node-b', 1000, WAIT_S]), { prepare: underIsolation });
      const renewing = await waiting((renewer) => renewed(renewer, lease, token, 'node-a', 60_000));
      await holder.commit();
      expect((await granting.result).value?.[0]).toMatchObject({ won: 1, holder: `${BigInt(token) + 1n}:node-b` });
      expect(await renewing.result).toEqual({ value: 0 });
    });

    it(`acquire under ${isolation}: waits for a renew in flight on the lease row and judges by what it commits`, async () => {
      const lease = unique('acquire-renew');
      const token = await grant(await session(), lease, 'node-a', 1);
      await waitFor(async () => (await serverNowUs()) > (await expiresUs(lease)), 30_000, 5);
      // The holder's renew, between its lock and its commit (it read the clock before the end: the
      // store's renew locks the row first, then reads the clock, then extends it).
      const renew = await holding(`UPDATE fenced_fences_leases SET expires_us = ${MYSQL_NOW_US_SQL} + 60000000, renewed_us = ${MYSQL_NOW_US_SQL} WHERE name = ?`, [lease]);
      const granting = await waiting((acquirer) => call(acquirer, ACQUIRE, [lease, 'node-b', 1000, WAIT_S]), { prepare: underIsolation });
      await renew.commit();
      expect((await granting.result).value?.[0]).toMatchObject({ won: 0, holder: `${token}:node-a` });
    });
  }
});

describe('MySQL lease store procedures, their records', () => {
  it('the election record keeps the newest elections of each lease, as many as it is told (the store keeps 32)', async () => {
    for (const keep of [32, 5, 1]) {
      const lease = unique('elections');
      const s = await session();
      for (let token = 1; token <= 40; token++) await call(s, RECORD_ELECTION, [lease, token, 'node-a', 1000, 1, false, keep]);
      const [rows] = await pool.query('SELECT COUNT(*) AS n, MIN(token) AS oldest, MAX(token) AS newest FROM fenced_fences_elections WHERE lease = ?', [lease]);
      expect((rows as Row[])[0], `keep ${keep}`).toMatchObject({ n: keep, oldest: 41 - keep, newest: 40 });
    }
  });
});
