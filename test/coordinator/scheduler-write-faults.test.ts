// No fire lost on the write path of a live leader: the app as the READMEs show it (the scheduler's
// handler is `(envelope) => handle(envelope)` over `guard.wrapHandler`, or a `sendFire` whose answer
// it returns), no retry loop of its own, and faults that make its writes fail while the term goes
// on: the fence database restarted (MariaDB, 20 s down), the guard's session killed mid-write (KILL
// CONNECTION), a pool that times out, a service that stops answering. Every due fire takes effect,
// exactly once. On a scheduler that counts a throwing handler as dispatched, each of these loses the
// fires the fault hit.
import { startMariadbServer, type MariadbServerProcess } from '@fenced/chaos';
import { createGuard } from '@fenced/consumer-guard';
import { sendFire, toNodeListener } from '@fenced/consumer-guard/http';
import { mysqlFences } from '@fenced/consumer-guard/mysql';
import { createCoordinator, createScheduler, fireId, type FireHandler, type Scheduler, type SchedulerEventMap } from '@fenced/coordinator';
import { parseFireId, type Fence } from '@fenced/shared';
import { createRedis, createTestSchema, deleteKeys, uniquePrefix, waitFor } from '#test-support';
import mysql, { type PoolConnection } from 'mysql2/promise';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

const EVERY_MS = 200;
const admin = createRedis();
const stoppers: Array<() => Promise<unknown> | void> = [];
let prefix = '';

afterEach(async () => {
  for (const stop of stoppers.splice(0).reverse()) await stop();
  await deleteKeys(admin, prefix);
});
afterAll(() => admin.disconnect());

async function serverNow(): Promise<number> {
  const [s, us] = await admin.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** The fires of the job due in [from, to]. */
function dueFires(job: string, from: number, to: number): string[] {
  const ids: string[] = [];
  for (let at = Math.ceil(from / EVERY_MS) * EVERY_MS; at <= to; at += EVERY_MS) ids.push(fireId(job, at));
  return ids;
}

/** A leader on Redis with one job whose fires go to `handler`, started; the scheduler's failures are collected. */
async function leader(handler: FireHandler, fences: readonly Fence[]) {
  prefix = uniquePrefix('write-faults');
  const redis = createRedis();
  const coordinator = createCoordinator({ redis, lease: 'billing', keyPrefix: prefix, ttlMs: 2000, renewIntervalMs: 500, fences });
  const scheduler: Scheduler = createScheduler({ coordinator, jobs: { invoices: { everyMs: EVERY_MS, handler } } });
  const failed: Array<SchedulerEventMap['fire.failed'][0]> = [];
  const lost: string[] = [];
  scheduler.on('fire.failed', (event) => failed.push(event));
  scheduler.on('fire.given-up', (event) => lost.push(event.fireId));
  scheduler.on('fire.stale', (event) => lost.push(event.fireId));
  stoppers.push(() => redis.disconnect());
  stoppers.push(() => coordinator.stop());
  stoppers.push(() => scheduler.stop());
  scheduler.start();
  await coordinator.start();
  await waitFor(() => coordinator.isLeader(), 10_000);
  return { coordinator, failed, lost };
}

/**
 * Runs the fault once `applied()` shows the stream going, then waits until every fire due from the
 * first applied one to a second after the fault took effect; returns what is missing and what took
 * effect more than once.
 */
async function throughFault(applied: () => Promise<string[]>, fault: () => Promise<void>) {
  await waitFor(async () => (await applied()).length >= 5, 20_000);
  const first = Math.min(...(await applied()).map((id) => parseFireId(id)!.scheduledAt));
  await fault();
  const to = (await serverNow()) + 1000;
  const wanted = dueFires('invoices', first, to);
  await waitFor(async () => {
    const have = new Set(await applied());
    return wanted.every((id) => have.has(id));
  }, 60_000).catch(() => undefined); // the assertions say what is missing
  const rows = await applied();
  const have = new Set(rows);
  return { missing: wanted.filter((id) => !have.has(id)), twice: rows.length - have.size, wanted: wanted.length };
}

describe('a fire whose write fails on a live leader (MariaDB fence store)', () => {
  let server: MariadbServerProcess;
  let pool: mysql.Pool;
  beforeAll(async () => {
    server = await startMariadbServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  /** The app of the consumer-guard README: a MySQL guard, its handler wrapped, a slow statement in its write. */
  async function app(table: string, slowMs: number) {
    pool = mysql.createPool({ uri: server.url, connectionLimit: 4 });
    pool.on('connection', (connection) => connection.on('error', () => {})); // as a pool's idle connections need
    await pool.query(`CREATE TABLE ${table} (fire_id VARCHAR(200) PRIMARY KEY, token BIGINT NOT NULL) ENGINE = InnoDB`);
    const guard = createGuard({ store: mysqlFences({ db: pool, table: `fences_${table}` }), resource: table });
    await guard.migrate();
    const handle = guard.wrapHandler(async (_payload, ctx) =>
      ctx.guardedWrite(async (conn) => {
        await (conn as PoolConnection).query(`INSERT INTO ${table} (fire_id, token) VALUES (?, ?)`, [ctx.fireId, ctx.token.toString()]);
        if (slowMs > 0) await (conn as PoolConnection).query('SELECT SLEEP(?)', [slowMs / 1000]);
      }),
    );
    const applied = async () => {
      const check = await mysql.createConnection({ uri: server.url });
      try {
        const [rows] = await check.query(`SELECT fire_id FROM ${table}`);
        return (rows as Array<{ fire_id: string }>).map((r) => r.fire_id);
      } finally {
        await check.end();
      }
    };
    stoppers.push(() => pool.end().catch(() => undefined));
    return { guard, handle, applied };
  }

  it('a MariaDB restart 20 s long, mid-stream: every due fire takes effect once, none lost', async () => {
    const { guard, handle, applied } = await app('restart_ledger', 0);
    const { failed, lost } = await leader((envelope) => handle(envelope), [guard]);
    const result = await throughFault(applied, async () => {
      await server.shutdown();
      const downAt = performance.now();
      // Down until the scheduler has failed fires for 20 s (it goes on leading: the lease is in Redis).
      await waitFor(() => performance.now() - downAt >= 20_000 && failed.length > 0, 40_000, 100).catch(() => undefined);
      await server.start();
    });
    expect(result).toEqual({ missing: [], twice: 0, wanted: result.wanted });
    expect(failed.length).toBeGreaterThan(0); // the fault hit the write path
    expect(lost).toEqual([]);
  }, 120_000);

  it('the guard session killed mid-write (KILL CONNECTION), four times: each fire takes effect once, none lost', async () => {
    const { guard, handle, applied } = await app('killed_ledger', 150);
    const { failed, lost } = await leader((envelope) => handle(envelope), [guard]);
    const killer = await mysql.createConnection({ uri: server.url });
    stoppers.push(() => killer.end());
    const result = await throughFault(applied, async () => {
      for (let kills = 0; kills < 4; ) {
        // The guard's session inside the write's transaction, in the slow statement after its insert.
        const [rows] = await killer.query("SELECT ID AS id FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP%'");
        const victim = (rows as Array<{ id: number }>)[0];
        if (victim === undefined) {
          await new Promise((r) => setTimeout(r, 5));
          continue;
        }
        await killer.query(`KILL CONNECTION ${Number(victim.id)}`).catch(() => undefined); // it may have committed meanwhile
        kills++;
        await waitFor(() => failed.length >= kills, 10_000).catch(() => undefined);
      }
    });
    expect(result).toEqual({ missing: [], twice: 0, wanted: result.wanted });
    expect(failed.length).toBeGreaterThanOrEqual(1);
    expect(lost).toEqual([]);
  }, 120_000);
});

describe('a fire whose write fails on a live leader (PostgreSQL pool, HTTP service)', () => {
  it('a pool that times out (every client held by other work for 3 s): every due fire takes effect once, none lost', async () => {
    const schema = await createTestSchema('pool_timeout');
    stoppers.push(() => schema.drop());
    const pool = new pg.Pool({ connectionString: process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test', options: `-c search_path=${schema.name}`, max: 1, connectionTimeoutMillis: 100 });
    pool.on('error', () => {});
    stoppers.push(() => pool.end());
    // Set up through the schema's own pool: the faulty pool's 100 ms to connect is the fault, and a
    // loaded machine can take longer than that to open the first connection of the set-up.
    await schema.pool.query('CREATE TABLE ledger (fire_id text PRIMARY KEY, token bigint NOT NULL)');
    await createGuard({ db: schema.pool, resource: 'ledger', schema: schema.name }).migrate();
    const guard = createGuard({ db: pool, resource: 'ledger', schema: schema.name });
    const handle = guard.wrapHandler(async (_payload, ctx) => ctx.guardedWrite((client) => client.query('INSERT INTO ledger VALUES ($1, $2)', [ctx.fireId, ctx.token.toString()])));
    const { failed, lost } = await leader((envelope) => handle(envelope), [guard]);
    const applied = async () => (await schema.pool.query<{ fire_id: string }>('SELECT fire_id FROM ledger')).rows.map((r) => r.fire_id);
    const result = await throughFault(applied, async () => {
      // Other work of the app holds the only client: taken as soon as no write holds it (a checkout
      // that waits past the 100 ms is the fault's own timeout, so it is asked again).
      let held: pg.PoolClient | undefined;
      await waitFor(async () => (held = await pool.connect().catch(() => undefined)) !== undefined, 20_000, 10);
      const heldAt = performance.now();
      await waitFor(() => performance.now() - heldAt >= 3000 && failed.length > 0, 20_000, 50).catch(() => undefined);
      held!.release();
    });
    expect(result).toEqual({ missing: [], twice: 0, wanted: result.wanted });
    expect(failed.length).toBeGreaterThan(0);
    expect(lost).toEqual([]);
  }, 120_000);

  it('a fenced service that stops answering (its calls time out), then answers 503: every due fire takes effect once, none lost', async () => {
    const schema = await createTestSchema('http_stall');
    stoppers.push(() => schema.drop());
    await schema.pool.query('CREATE TABLE ledger (fire_id text PRIMARY KEY, token bigint NOT NULL)');
    const guard = createGuard({ db: schema.pool, resource: 'ledger', schema: schema.name });
    await guard.migrate();
    const listener = toNodeListener(guard.wrapRoute(async (trx, fire) => {
      await (trx as pg.PoolClient).query('INSERT INTO ledger VALUES ($1, $2)', [fire.fireId, fire.token.toString()]);
      return { status: 201, body: { ok: true } };
    }));
    let mode: 'up' | 'silent' | 'unavailable' = 'up';
    const held: ServerResponse[] = [];
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      if (mode === 'silent') return void held.push(res); // frozen: the request is read, never answered
      if (mode === 'unavailable') return void res.writeHead(503, { 'fenced-outcome': 'unavailable', 'retry-after': '1' }).end();
      listener(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    stoppers.push(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ledger`;
    // The handler as the README shows it: the call with the fire's context (the term's signal, the
    // lease's TTL as its timeout), its answer returned.
    const { failed, lost } = await leader((envelope, context) => sendFire(url, { envelope, body: { amount: 1 }, ...context }), [guard]);
    const applied = async () => (await schema.pool.query<{ fire_id: string }>('SELECT fire_id FROM ledger')).rows.map((r) => r.fire_id);
    const result = await throughFault(applied, async () => {
      mode = 'silent';
      await waitFor(() => failed.some((e) => (e.error as Error).name === 'FireCallTimeoutError'), 20_000).catch(() => undefined);
      const silentAt = performance.now();
      await waitFor(() => performance.now() - silentAt >= 2000, 10_000, 50);
      mode = 'unavailable';
      await waitFor(() => failed.some((e) => /HTTP 503/.test((e.error as Error).message)), 10_000).catch(() => undefined);
      mode = 'up';
      for (const res of held.splice(0)) res.destroy();
    });
    expect(result).toEqual({ missing: [], twice: 0, wanted: result.wanted });
    expect(failed.map((e) => (e.error as Error).message).join('\n')).toMatch(/HTTP 503/);
    // A stalled call was given up at the lease's TTL (2 s here), not at sendFire's own 10 s.
    expect(failed.filter((e) => (e.error as Error).name === 'FireCallTimeoutError').map((e) => (e.error as { timeoutMs: number }).timeoutMs)).toContain(2000);
    expect(lost).toEqual([]);
  }, 120_000);
});
