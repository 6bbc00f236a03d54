import { isFencedError, type FencedEvent } from '@fenced/shared';
import { startPgBouncer, type PgBouncerProcess } from '@fenced/chaos';
import { createTestSchema, testDatabaseUrl, waitFor } from '#test-support';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createCoordinator, createLeaseGroup, createScheduler, type Coordinator } from '../../index.js';
import { LATEST_LEASE_MIGRATION, postgresLeases, type PostgresLeasesOptions } from './index.js';

// What the PostgreSQL lease store promises beyond the conformance suite (test/lease-store/): its
// migrations, its typed errors, and how standbys hear releases (LISTEN, its reconnect, polling).

let schema: Awaited<ReturnType<typeof createTestSchema>>;
const stoppers: Array<() => Promise<unknown> | void> = [];
let n = 0;

beforeAll(async () => {
  schema = await createTestSchema('pgleases');
  await postgresLeases({ pool: schema.pool, schema: schema.name }).migrate();
});
afterEach(async () => {
  for (const stop of stoppers.splice(0).reverse()) await stop();
});
afterAll(async () => {
  await schema.drop();
});

function pool(connectionString = testDatabaseUrl()): pg.Pool {
  const p = new pg.Pool({ connectionString, max: 4, application_name: `pgleases-${process.pid}-${++n}` });
  p.on('error', () => {});
  stoppers.push(() => p.end().catch(() => undefined));
  return p;
}

function coordinator(options: Partial<PostgresLeasesOptions> & { lease: string; events?: FencedEvent[]; retryMs?: number; p?: pg.Pool }): Coordinator {
  const { lease, events, retryMs = 20_000, p = pool(), ...store } = options;
  const c = createCoordinator({
    store: postgresLeases({ pool: p, schema: schema.name, ...store }),
    lease,
    ttlMs: 30_000,
    renewIntervalMs: 5000,
    acquireRetryMs: retryMs,
    ...(events === undefined ? {} : { logger: (e) => events.push(e) }),
  });
  stoppers.push(() => c.stop());
  return c;
}

/** a leads; b stands by; a stops: how long until b leads (its retry is 20 s away). */
async function handoverMs(a: Coordinator, b: Coordinator): Promise<number> {
  await a.start();
  await waitFor(() => a.isLeader(), 10_000);
  await b.start();
  const stoppedAt = performance.now();
  await a.stop();
  await waitFor(() => b.isLeader(), 20_000);
  return performance.now() - stoppedAt;
}

/**
 * The errors of the lease's own requests (its acquires), from the coordinator's events. Not every
 * `error`: the standbys' LISTEN connection is another request, which on a loaded machine can time out
 * (200 ms) whatever the schema (CI beside four CPU hogs: 'listen timed out after 200 ms'), and it is
 * not what these tests judge. Nor an acquire that outran its own bound (a TimeoutError, the same
 * starvation): it got no answer, so there is nothing in it to judge; the tests wait for answers.
 */
function acquireErrorsInto(errors: unknown[]): (event: FencedEvent) => void {
  return (event) => {
    if (event.type === 'lease-store.error' && event.store === 'postgres' && event.operation === 'acquire' && (event.error as Error | undefined)?.name !== 'TimeoutError') errors.push(event.error);
  };
}

describe('migrations', () => {
  it('are idempotent, and refuse a database migrated by a newer fenced without changing it', async () => {
    const leases = postgresLeases({ pool: schema.pool, schema: schema.name });
    await leases.migrate();
    const table = `"${schema.name}"."fenced_fences_lease_schema"`;
    await schema.pool.query(`INSERT INTO ${table} (id) VALUES ($1)`, [LATEST_LEASE_MIGRATION + 1]);
    try {
      let error: unknown;
      await leases.migrate().catch((err: unknown) => (error = err));
      expect(isFencedError(error, 'SCHEMA_TOO_NEW')).toBe(true);
    } finally {
      await schema.pool.query(`DELETE FROM ${table} WHERE id = $1`, [LATEST_LEASE_MIGRATION + 1]);
    }
  });

  it('a store used before migrate() fails with SCHEMA_MISSING, and its node never leads', async () => {
    const fresh = await createTestSchema('pgleases_bare');
    stoppers.push(() => fresh.drop());
    const errors: unknown[] = [];
    const c = createCoordinator({ store: postgresLeases({ pool: fresh.pool, schema: fresh.name }), lease: 'x', ttlMs: 600, renewIntervalMs: 150, acquireRetryMs: 50, logger: acquireErrorsInto(errors) });
    stoppers.push(() => c.stop());
    await c.start();
    await waitFor(() => errors.length >= 2, 10_000);
    expect(errors.every((e) => isFencedError(e, 'SCHEMA_MISSING')), errors.map(String).join('; ')).toBe(true);
    expect(c.isLeader()).toBe(false);
  });

  it('a role without rights on the migrated schema: SCHEMA_MISSING (naming the schema), its node never leads, and nothing is written', async () => {
    const role = `fenced_norights_${process.pid}_${n}`;
    await schema.pool.query(`CREATE ROLE ${role} LOGIN`);
    const url = new URL(testDatabaseUrl());
    url.username = role;
    url.password = '';
    const p = new pg.Pool({ connectionString: url.toString(), max: 2 });
    p.on('error', () => undefined);
    stoppers.push(async () => {
      await p.end();
      await schema.pool.query(`DROP ROLE ${role}`);
    });
    const errors: unknown[] = [];
    const lease = `norights-${n}`;
    const c = createCoordinator({ store: postgresLeases({ pool: p, schema: schema.name }), lease, ttlMs: 600, renewIntervalMs: 150, acquireRetryMs: 50, logger: acquireErrorsInto(errors) });
    stoppers.push(() => c.stop());
    await c.start();
    await waitFor(() => errors.length >= 2, 10_000);
    expect(errors.every((e) => isFencedError(e, 'SCHEMA_MISSING')), errors.map(String).join('; ')).toBe(true);
    expect((errors[0] as Error).message).toContain(schema.name);
    expect(c.isLeader()).toBe(false);
    const rows = await schema.pool.query(`SELECT 1 FROM "${schema.name}".fenced_fences_leases WHERE name = $1`, [lease]);
    expect(rows.rowCount).toBe(0);
  });
});

describe('its functions at their edges', () => {
  const fn = (suffix: string) => `"${schema.name}"."fenced_fences_${suffix}"`;
  const acquire = (lease: string, ttlMs: number, graceMs: number, takeoverMs: number) =>
    schema.pool.query(`SELECT won, token FROM ${fn('lease_acquire')}($1, $2, $3, $4, $5)`, [lease, 'node-a', ttlMs, graceMs, takeoverMs]);
  const renew = (lease: string, token: string, ttlMs: number) => schema.pool.query(`SELECT renewed FROM ${fn('lease_renew')}($1, $2, $3, $4)`, [[lease], [token], ['node-a'], ttlMs]);
  const beat = (group: string, ttlMs: number) => schema.pool.query(`SELECT members FROM ${fn('member_beat')}($1, $2, $3)`, [group, 'member-a', ttlMs]);
  const refused = { code: '22023' };

  it('take the least of each bound (a TTL and a grace period of 1 ms, no takeover budget) and refuse one less with 22023, changing nothing', async () => {
    const lease = `edges-${++n}`;
    await expect(acquire(lease, 0, 250, 10_000)).rejects.toMatchObject(refused);
    await expect(acquire(lease, 1_000, 0, 10_000)).rejects.toMatchObject(refused);
    await expect(acquire(lease, 1_000, 250, -1)).rejects.toMatchObject(refused);
    expect((await schema.pool.query(`SELECT 1 FROM "${schema.name}".fenced_fences_leases WHERE name = $1`, [lease])).rows).toEqual([]);
    const { rows } = await acquire(lease, 60_000, 1, 0);
    expect(rows).toEqual([{ won: true, token: '1' }]);
    await expect(renew(lease, '1', 0)).rejects.toMatchObject(refused);
    expect((await renew(lease, '1', 1)).rows).toEqual([{ renewed: true }]);
    expect((await acquire(`${lease}-short`, 1, 1, 0)).rows).toEqual([{ won: true, token: '1' }]);
    await expect(beat(`${lease}-group`, 0)).rejects.toMatchObject(refused);
    expect((await beat(`${lease}-group`, 1)).rows).toEqual([{ members: ['member-a'] }]);
  });

  it('the election record keeps the newest elections of each lease, as many as it is told', async () => {
    for (const keep of [32, 5, 1]) {
      const lease = `elections-${++n}`;
      for (let token = 1; token <= 40; token++) await schema.pool.query(`SELECT ${fn('lease_elected')}($1, $2, 'node-a', 1000, 1, false, $3)`, [lease, token, keep]);
      const { rows } = await schema.pool.query(`SELECT count(*)::int AS n, min(token)::int AS oldest FROM "${schema.name}".fenced_fences_elections WHERE lease = $1`, [lease]);
      expect(rows[0], `keep ${keep}`).toEqual({ n: keep, oldest: 41 - keep });
    }
  });

  // Judged after a wait: another session holds the lease row (as an acquire or a renew in flight
  // holds it), the call waits for it, and what it decides must be by the clock after the wait.
  describe('after a wait for the lease row', () => {
    /** A session of its own that holds `lease`'s row FOR UPDATE until `release()`, which answers the server's clock (µs) just before it lets go. */
    async function holdRow(lease: string) {
      const holder = new pg.Client({ connectionString: testDatabaseUrl() });
      await holder.connect();
      stoppers.push(() => holder.end().catch(() => undefined));
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM "${schema.name}".fenced_fences_leases WHERE name = $1 FOR UPDATE`, [lease]);
      return {
        async release(): Promise<bigint> {
          const { rows } = await holder.query(`SELECT ${NOW_US} AS now`);
          await holder.query('COMMIT');
          return BigInt(rows[0].now);
        },
      };
    }
    /** Runs `sql` on a session of its own and resolves once it waits on a lock (or settled); `result` settles with the call. */
    async function waitingCall(sql: string, values: unknown[]) {
      const client = new pg.Client({ connectionString: testDatabaseUrl() });
      await client.connect();
      stoppers.push(() => client.end().catch(() => undefined));
      const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
      let done = false;
      const result = client.query(sql, values).then(
        (r) => r.rows,
        (error: unknown) => ({ error }),
      );
      void result.finally(() => (done = true));
      await waitFor(async () => done || (await schema.pool.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, [pid])).rows.length > 0, 20_000, 20);
      return { result };
    }
    const NOW_US = `floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint::text`;
    const serverUs = async () => BigInt((await schema.pool.query(`SELECT ${NOW_US} AS now`)).rows[0].now);
    const leaseRow = async (lease: string) =>
      (
        await schema.pool.query(
          `SELECT floor(extract(epoch FROM expires_at) * 1000000)::bigint::text AS expires, floor(extract(epoch FROM renewed_at) * 1000000)::bigint::text AS renewed, floor(extract(epoch FROM granted_at) * 1000000)::bigint::text AS granted FROM "${schema.name}".fenced_fences_leases WHERE name = $1`,
          [lease],
        )
      ).rows[0] as { expires: string; renewed: string; granted: string };
    const ACQUIRE_SQL = () => `SELECT won, token, remaining_ms::text, now_us::text, ended FROM ${fn('lease_acquire')}($1, $2, $3, $4, $5)`;
    const RENEW_SQL = () => `SELECT renewed, now_us::text FROM ${fn('lease_renew')}($1, $2, $3, $4)`;

    it('acquire: decides, and dates the grant, by the clock after the wait', async () => {
      const lease = `after-wait-${++n}`;
      await acquire(lease, 1, 250, 10_000);
      await waitFor(async () => (await serverUs()) > BigInt((await leaseRow(lease)).expires), 10_000, 5);
      const row = await holdRow(lease);
      const granting = await waitingCall(ACQUIRE_SQL(), [lease, 'node-b', 60_000, 5_000, 10_000]);
      const released = await row.release();
      const [reply] = (await granting.result) as Array<{ won: boolean; now_us: string }>;
      expect(reply).toMatchObject({ won: true, token: '2' });
      expect(BigInt(reply!.now_us)).toBeGreaterThanOrEqual(released);
      const stamped = await leaseRow(lease);
      expect(BigInt(stamped.granted)).toBeGreaterThanOrEqual(released);
      expect(BigInt(stamped.expires) - BigInt(stamped.granted)).toBe(60_000_000n);
    });

    it('acquire: gives up at its takeover budget when what holds the row is no write it may end, and says when', async () => {
      const lease = `give-up-${++n}`;
      await acquire(lease, 1, 250, 10_000);
      const row = await holdRow(lease);
      const before = await serverUs();
      const [reply] = (await (await waitingCall(ACQUIRE_SQL(), [lease, 'node-b', 60_000, 50, 300])).result) as Array<{ won: boolean; remaining_ms: string; now_us: string; ended: number }>;
      await row.release();
      expect(reply).toMatchObject({ won: false, remaining_ms: '0', ended: 0 });
      expect(BigInt(reply!.now_us)).toBeGreaterThanOrEqual(before + 300_000n);
    });

    it('renew: extends from, and answers, the clock after the wait; a lease that ran out during the wait is not renewed', async () => {
      const lease = `renew-wait-${++n}`;
      const [live] = (await acquire(lease, 60_000, 250, 10_000)).rows as Array<{ token: string }>;
      let row = await holdRow(lease);
      let renewing = await waitingCall(RENEW_SQL(), [[lease], [live!.token], ['node-a'], 60_000]);
      const released = await row.release();
      const [reply] = (await renewing.result) as Array<{ renewed: boolean; now_us: string }>;
      expect(reply!.renewed).toBe(true);
      expect(BigInt(reply!.now_us)).toBeGreaterThanOrEqual(released);
      const stamped = await leaseRow(lease);
      expect(BigInt(stamped.renewed)).toBeGreaterThanOrEqual(released);
      expect(BigInt(stamped.expires)).toBeGreaterThanOrEqual(released + 60_000_000n);

      // Long enough that the renew waits well before the end; on a machine starved for longer it
      // arrives after the end, and the answer is the same.
      const short = `renew-ends-${++n}`;
      const [ending] = (await acquire(short, 2_000, 250, 10_000)).rows as Array<{ token: string }>;
      row = await holdRow(short);
      renewing = await waitingCall(RENEW_SQL(), [[short], [ending!.token], ['node-a'], 60_000]);
      const end = BigInt((await leaseRow(short)).expires);
      await waitFor(async () => (await serverUs()) > end, 10_000, 20);
      await row.release();
      expect(((await renewing.result) as Array<{ renewed: boolean }>)[0]!.renewed).toBe(false);
    });

    it('record fires: a lease that ran out while the record waited for its row records nothing', async () => {
      const lease = `record-wait-${++n}`;
      const [won] = (await acquire(lease, 2_000, 250, 10_000)).rows as Array<{ token: string }>;
      const row = await holdRow(lease);
      const recording = await waitingCall(`SELECT ${fn('record_fires')}($1, $2, 'node-a', NULL, ARRAY['invoices'], ARRAY[1000]::bigint[], ARRAY[1001]::bigint[]) AS recorded`, [lease, won!.token]);
      const end = BigInt((await leaseRow(lease)).expires);
      await waitFor(async () => (await serverUs()) > end, 10_000, 20);
      await row.release();
      expect(await recording.result).toEqual([{ recorded: 0 }]);
      expect((await schema.pool.query(`SELECT 1 FROM "${schema.name}".fenced_fences_fires WHERE lease = $1`, [lease])).rows).toEqual([]);
    });
  });
});

describe('hearing releases', () => {
  it('a standby hears a release by NOTIFY, and says so', async () => {
    const events: FencedEvent[] = [];
    const lease = `notify-${n}`;
    const ms = await handoverMs(coordinator({ lease }), coordinator({ lease, events }));
    expect(ms).toBeLessThan(2000);
    expect(events).toContainEqual(expect.objectContaining({ type: 'lease.listening', mode: 'notify' }));
  });

  it('the LISTEN connection killed (pg_terminate_backend): reported, polled meanwhile, reconnected, and the next release is heard at once', async () => {
    const events: FencedEvent[] = [];
    const lease = `relisten-${n}`;
    const p = pool();
    const a = coordinator({ lease });
    await a.start();
    await waitFor(() => a.isLeader(), 10_000);
    const b = coordinator({ lease, events, p });
    await b.start();
    const name = (p.options as { application_name: string }).application_name;
    const listening = async () =>
      (await schema.pool.query(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, [name])).rows as Array<{ pid: number }>;
    await waitFor(async () => (await listening()).length === 1, 10_000);
    const [{ pid }] = (await listening()) as [{ pid: number }];
    await schema.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    await waitFor(() => events.some((e) => e.type === 'lease.listening' && e.mode === 'polling'), 10_000);
    // Back on a new connection, proven by its probe.
    await waitFor(async () => events.filter((e) => e.type === 'lease.listening' && e.mode === 'notify').length >= 2 && (await listening()).some((r) => r.pid !== pid), 10_000);
    const stoppedAt = performance.now();
    await a.stop();
    await waitFor(() => b.isLeader(), 20_000);
    expect(performance.now() - stoppedAt).toBeLessThan(2000);
  });

  it('listen: poll never LISTENs, and standbys still take a released lease within a few polls', async () => {
    const events: FencedEvent[] = [];
    const lease = `poll-${n}`;
    const ms = await handoverMs(coordinator({ lease, listen: 'poll', pollMs: 100 }), coordinator({ lease, listen: 'poll', pollMs: 100, events }));
    expect(ms).toBeLessThan(3000);
    expect(events).toContainEqual(expect.objectContaining({ type: 'lease.listening', mode: 'polling' }));
  });

  describe('behind PgBouncer in transaction mode', () => {
    let bouncer: PgBouncerProcess;
    beforeAll(async () => {
      bouncer = await startPgBouncer({ upstream: testDatabaseUrl(), poolMode: 'transaction' });
    });
    afterAll(async () => {
      await bouncer?.stop();
    });

    it('takes a client that sends startup options (node-postgres sends PGOPTIONS so), which PgBouncer ignores', async () => {
      const client = new pg.Client({ connectionString: bouncer.url, options: '-c statement_timeout=30s' });
      await client.connect();
      try {
        expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      } finally {
        await client.end();
      }
    });

    it('finds that LISTEN does not deliver there, falls back to polling and says why, and hands over all the same', async () => {
      const events: FencedEvent[] = [];
      const lease = `bouncer-${n}`;
      const through = () => pool(bouncer.url);
      const ms = await handoverMs(
        coordinator({ lease, p: through(), pollMs: 100, probeTimeoutMs: 500 }),
        coordinator({ lease, p: through(), pollMs: 100, probeTimeoutMs: 500, events }),
      );
      expect(ms).toBeLessThan(3000);
      const polling = events.find((e) => e.type === 'lease.listening' && e.mode === 'polling');
      expect(polling).toMatchObject({ reason: expect.stringContaining('did not reach the LISTEN connection') });
      expect(events.some((e) => e.type === 'lease.listening' && e.mode === 'notify')).toBe(false);
    });
  });
});

describe('the scheduler and lease groups on PostgreSQL', () => {
  it('the scheduler fires on the server clock, keeps its record beside the lease, and a deposed term records nothing', async () => {
    const lease = `sched-${n}`;
    const fired: string[] = [];
    const a = coordinator({ lease });
    const s = createScheduler({ coordinator: a, jobs: { tick: { everyMs: 100, handler: (e) => void fired.push(e.fireId) } } });
    s.start();
    stoppers.push(() => s.stop());
    await a.start();
    await waitFor(() => fired.length >= 3, 10_000);
    const fires = `"${schema.name}"."fenced_fences_fires"`;
    const recorded = async () => Number(((await schema.pool.query(`SELECT value FROM ${fires} WHERE lease = $1 AND field = 'tick'`, [lease])).rows[0] as { value: string }).value);
    await waitFor(async () => (await recorded()) > 0, 5000);
    const stale = a.currentTerm()!.leaseValue;
    await s.stop();
    await a.stop();
    const log = a.fireLog();
    expect(await log.record(stale, { job: 'tick', scheduledAt: 9_999_999_999_999 })).toBe(0);
    expect(await recorded()).toBeLessThan(9_999_999_999_999);
  });

  it('a lease group shares its leases between two members and takes a stopped member’s back', async () => {
    const group = `grp-${n}`;
    const mk = (nodeId: string) => {
      const g = createLeaseGroup({ store: postgresLeases({ pool: pool(), schema: schema.name }), group, shards: 6, nodeId, ttlMs: 1500, renewIntervalMs: 300 });
      stoppers.push(() => g.stop());
      return g;
    };
    const a = mk('a');
    const b = mk('b');
    await Promise.all([a.start(), b.start()]);
    await waitFor(() => a.led().length === 3 && b.led().length === 3, 20_000);
    await b.stop();
    await waitFor(() => a.led().length === 6, 20_000);
  });

  it('a member renews all its leases with about one statement per renew interval, not one per lease', async () => {
    const p = pool();
    const renewTexts: number[] = [];
    const counted = new Proxy(p, {
      get(target, property, receiver) {
        if (property === 'query') {
          return (text: string, values?: unknown[]) => {
            if (typeof text === 'string' && text.includes('_lease_renew')) renewTexts.push(performance.now());
            return target.query(text, values);
          };
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const renewIntervalMs = 400;
    const g = createLeaseGroup({ store: postgresLeases({ pool: counted, schema: schema.name }), group: `many-${++n}`, shards: 200, nodeId: 'solo', ttlMs: 3000, renewIntervalMs });
    stoppers.push(() => g.stop());
    await g.start();
    await waitFor(() => g.led().length === 200, 30_000);
    // Two intervals to align (the first renews of leases elected in different batches), then measure.
    const alignedFrom = renewTexts.length;
    await waitFor(() => renewTexts.length >= alignedFrom + 2, 10_000);
    const from = renewTexts.length;
    const startedAt = performance.now();
    await waitFor(() => performance.now() - startedAt >= 5 * renewIntervalMs, 10_000, 20);
    const statements = renewTexts.length - from;
    const intervals = (performance.now() - startedAt) / renewIntervalMs;
    // 200 leases: one statement per lease would be 200 per interval.
    expect(statements / intervals, `${statements} renew statements in ${intervals.toFixed(1)} intervals`).toBeLessThanOrEqual(2);
    expect(g.led()).toHaveLength(200);
  });
});
