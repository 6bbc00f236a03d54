/**
 * pnpm bench:leases — the four lease stores side by side in one run, the same measurements on each:
 * Redis (a private redis-server on a free loopback port), PostgreSQL (a schema of its own on
 * DATABASE_URL, default the local server), MySQL/MariaDB (a database of its own on MYSQL_URL, default
 * the local server) and etcd (a private three-member cluster on loopback ports).
 *
 * - graceful handover: the leader stops; the time until a standby is elected (target ≤ 50 ms);
 * - crash failover: the leader's connections die with no release; the time until a standby is
 *   elected (bound: TTL + renew interval);
 * - steady load: one leader and two standbys, idle: requests each node sends per second;
 * - a single job's lateness: one job every 50 ms, how long after its due time each fire's handler
 *   starts (the server's clock is this host's: both servers run here), its record kept by the store;
 * - N jobs due at once (default 10,000, every 10 s): from the due time until the last handler of one
 *   burst started, every fire recorded in the store;
 * - 1,000 leases in one lease group (one process): the requests it sends per second once they all
 *   lead, and the server's CPU (Redis: INFO's used_cpu; PostgreSQL: /proc of the backends serving
 *   the group; MySQL/MariaDB: /proc of the whole server, one process, so what else it serves counts
 *   too; etcd: /proc of its three members), against the target of 5 % of a core.
 *
 * etcd grants whole seconds, at least 1.5 × its election timeout (2 s here): its leases outlive the
 * 1 s TTL asked for, which is what its crash failover shows.
 *
 * Flags: --rounds N (handovers and failovers of each kind, default 10), --leases N (default 1000),
 * --jobs N (default 10000), --window S (seconds each load is measured, default 10), --stores a,b (which
 * stores, default all four), --json.
 */
import { parseArgs } from 'node:util';
import { cpuSecondsOf } from './process-cpu.js';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createCoordinator, createLeaseGroup, createScheduler, redisLeases, type Coordinator, type LeaseBackend } from '@fenced/coordinator';
import { postgresLeases } from '@fenced/coordinator/postgres';
import { mysqlLeases } from '@fenced/coordinator/mysql';
import mysql from 'mysql2/promise';
import { readFileSync } from 'node:fs';
import { etcdLeases } from '@fenced/coordinator/etcd';
import { startEtcdCluster, startRedisServer } from '@fenced/chaos';
import { Etcd3 } from 'etcd3';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '10' },
    leases: { type: 'string', default: '1000' },
    jobs: { type: 'string', default: '10000' },
    window: { type: 'string', default: '10' },
    stores: { type: 'string', default: 'redis,postgres,mysql,etcd' },
    json: { type: 'boolean', default: false },
  },
});
const rounds = Number(args.rounds);
const leaseCount = Number(args.leases);
const jobCount = Number(args.jobs);
const windowS = Number(args.window);
if (!(rounds >= 1) || !(leaseCount >= 1) || !(jobCount >= 1) || !(windowS > 0)) {
  process.stderr.write('usage: bench:leases [--rounds N] [--leases N] [--jobs N] [--window S] [--json]\n');
  process.exit(2);
}

const TTL = 1000;
const RENEW = 250;
const GROUP_TTL = 15_000;
const GROUP_RENEW = 5000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const progress = (line: string) => void (!args.json && process.stderr.write(`${line}\n`));
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(0.99 * xs.length))]!;
const waitFor = async (predicate: () => boolean, timeoutMs: number) => {
  const deadline = performance.now() + timeoutMs;
  while (!predicate()) {
    if (performance.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await sleep(5);
  }
};

/** One store under test: a backend per simulated process, a way to crash one, and its load counters. */
interface Store {
  readonly name: 'redis' | 'postgres' | 'mysql' | 'etcd';
  backend(): { backend: LeaseBackend; crash(): Promise<void>; requests(): number; close(): Promise<void> };
  /** The server's CPU seconds so far, per process that serves us (Redis: one). */
  serverCpu(): Promise<ReadonlyMap<string, number>>;
  close(): Promise<void>;
}

async function redisStore(): Promise<Store> {
  const server = await startRedisServer();
  const clients: Redis[] = [];
  const admin = new Redis(server.url);
  const info = async () => {
    const text = await admin.info('cpu');
    const field = (name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(text)?.[1] ?? 0);
    return new Map([['redis-server', field('used_cpu_sys') + field('used_cpu_user')]]);
  };
  return {
    name: 'redis',
    backend() {
      const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
      client.on('error', () => {});
      clients.push(client);
      let sent = 0;
      const send = client.sendCommand.bind(client);
      client.sendCommand = ((command: Parameters<typeof send>[0], stream?: Parameters<typeof send>[1]) => {
        sent++;
        return send(command, stream);
      }) as typeof client.sendCommand;
      return { backend: redisLeases(client, { keyPrefix: 'bench' }), crash: async () => client.disconnect(), requests: () => sent, close: async () => client.disconnect() };
    },
    serverCpu: info,
    async close() {
      for (const c of clients) c.disconnect();
      admin.disconnect();
      await server.stop();
    },
  };
}

async function postgresStore(url: string): Promise<Store> {
  const schema = `bench_leases_${process.pid}`;
  const admin = new pg.Pool({ connectionString: url, max: 2 });
  admin.on('error', () => {});
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE; CREATE SCHEMA ${schema}`);
  await postgresLeases({ pool: admin, schema }).migrate();
  const pools: pg.Pool[] = [];
  const app = `bench-leases-${process.pid}`;
  return {
    name: 'postgres',
    backend() {
      const name = `${app}-${pools.length}`;
      // Idle connections kept: the CPU of the backends serving it is read per backend, before and after.
      const pool = new pg.Pool({ connectionString: url, max: 4, application_name: name, idleTimeoutMillis: 0 });
      pool.on('error', () => {});
      pools.push(pool);
      let sent = 0;
      const query = pool.query.bind(pool) as (...a: unknown[]) => Promise<unknown>;
      (pool as unknown as { query: unknown }).query = (...a: unknown[]) => {
        sent++;
        return query(...a);
      };
      return {
        backend: postgresLeases({ pool, schema }),
        crash: async () => {
          // Its connections die, nothing is released: the pool ended, every backend of it killed.
          const ended = pool.end().catch(() => undefined);
          await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [name]);
          void ended;
        },
        requests: () => sent,
        close: () => pool.end().catch(() => undefined),
      };
    },
    async serverCpu() {
      const pids = (await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1`, [`${app}-%`])).rows.map((r) => r.pid);
      return new Map(pids.map((pid) => [String(pid), cpuSecondsOf(pid)]));
    },
    async close() {
      await Promise.all(pools.map((p) => p.end().catch(() => undefined)));
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await admin.end();
    },
  };
}

async function mysqlStore(url: string): Promise<Store> {
  const database = `bench_leases_${process.pid}`;
  const admin = mysql.createPool({ uri: url, connectionLimit: 2 });
  await admin.query(`DROP DATABASE IF EXISTS ${database}`);
  await admin.query(`CREATE DATABASE ${database}`);
  const pools: mysql.Pool[] = [];
  await mysqlLeases({ pool: admin, database }).migrate();
  // The server is one process: its CPU is read from /proc of the pid its pid file names (a local server).
  const pidFile = String(((await admin.query('SELECT @@pid_file AS f'))[0] as Array<{ f: string }>)[0]!.f);
  const serverPid = Number(readFileSync(pidFile, 'utf8').trim());
  return {
    name: 'mysql',
    backend() {
      const pool = mysql.createPool({ uri: url, database, connectionLimit: 4 });
      pools.push(pool);
      const threads: number[] = [];
      pool.on('connection', (connection) => void threads.push(connection.threadId));
      let sent = 0;
      const query = pool.query.bind(pool) as (...a: unknown[]) => Promise<unknown>;
      (pool as unknown as { query: unknown }).query = (...a: unknown[]) => {
        sent++;
        return query(...a);
      };
      return {
        backend: mysqlLeases({ pool }),
        crash: async () => {
          // Its connections die, nothing is released: the pool ended, every session of it killed.
          const ended = pool.end().catch(() => undefined);
          for (const id of threads) await admin.query(`KILL CONNECTION ${id}`).catch(() => undefined);
          void ended;
        },
        requests: () => sent,
        close: () => pool.end().catch(() => undefined),
      };
    },
    async serverCpu() {
      return new Map([['mariadbd', cpuSecondsOf(serverPid)]]);
    },
    async close() {
      await Promise.all(pools.map((p) => p.end().catch(() => undefined)));
      await admin.query(`DROP DATABASE IF EXISTS ${database}`);
      await admin.end();
    },
  };
}

async function etcdStore(): Promise<Store> {
  const cluster = await startEtcdCluster();
  const clients: Etcd3[] = [];
  return {
    name: 'etcd',
    backend() {
      const client = new Etcd3({ hosts: [...cluster.endpoints], dialTimeout: 2000 });
      clients.push(client);
      let sent = 0;
      // Every unary call and every keep-alive written, counted where the client sends them.
      for (const service of [client.kv, client.leaseClient] as unknown as Record<string, unknown>[]) {
        for (const method of Object.getOwnPropertyNames(Object.getPrototypeOf(service))) {
          const original = service[method];
          if (method === 'constructor' || typeof original !== 'function') continue;
          service[method] = (...a: unknown[]) => {
            if (method !== 'leaseKeepAlive') sent++;
            const result = (original as (...x: unknown[]) => unknown).apply(service, a);
            if (method !== 'leaseKeepAlive') return result;
            return (result as Promise<{ write: (r: unknown) => boolean }>).then((stream) => {
              const write = stream.write.bind(stream);
              stream.write = (r: unknown) => (sent++, write(r));
              return stream;
            });
          };
        }
      }
      return { backend: etcdLeases({ client, prefix: `bench-${process.pid}/` }), crash: async () => client.close(), requests: () => sent, close: async () => client.close() };
    },
    async serverCpu() {
      return new Map(cluster.members.flatMap((m) => (m.pid === undefined ? [] : [[m.name, cpuSecondsOf(m.pid)] as const])));
    },
    async close() {
      for (const c of clients) c.close();
      await cluster.stop();
    },
  };
}

/** Time from the leader's end (stop, or its connections dying) until a standby is elected. */
async function failover(store: Store, kind: 'graceful' | 'crash', round: number): Promise<number> {
  const lease = `fo-${kind}-${round}`;
  const make = () => {
    const b = store.backend();
    return { ...b, c: createCoordinator({ store: b.backend, lease, ttlMs: TTL, renewIntervalMs: RENEW, acquireRetryMs: RENEW }) };
  };
  const leader = make();
  await leader.c.start();
  await waitFor(() => leader.c.isLeader(), 10_000);
  const standbys = [make(), make()];
  await Promise.all(standbys.map((s) => s.c.start()));
  await sleep(Math.random() * RENEW); // at a random point of the renew cycle
  const elected = new Promise<number>((resolve) => {
    for (const s of standbys) s.c.once('elected', () => resolve(performance.now()));
  });
  leader.c.on('error', () => {});
  const endedAt = performance.now();
  if (kind === 'crash') await leader.crash();
  else await leader.c.stop();
  const at = await elected;
  await leader.c.stop();
  await Promise.all(standbys.map((s) => s.c.stop()));
  // Each round's connections go with it: twenty rounds of three processes would exhaust the server.
  await Promise.all([leader, ...standbys].map((n) => n.close()));
  return at - endedAt;
}

async function measure(store: Store): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const kind of ['graceful', 'crash'] as const) {
    const times: number[] = [];
    for (let i = 0; i < rounds; i++) times.push(await failover(store, kind, i));
    out[`${kind} median ms`] = Math.round(median(times));
    out[`${kind} max ms`] = Math.round(Math.max(...times));
    progress(`${store.name}: ${kind} median ${out[`${kind} median ms`]} ms, max ${out[`${kind} max ms`]} ms`);
  }
  // Steady load of one lease: one leader, two standbys, idle.
  {
    const nodes = [store.backend(), store.backend(), store.backend()];
    const cs: Coordinator[] = nodes.map((n) => createCoordinator({ store: n.backend, lease: 'steady', ttlMs: TTL, renewIntervalMs: RENEW, acquireRetryMs: RENEW }));
    await Promise.all(cs.map((c) => c.start()));
    await sleep(1000);
    const before = nodes.map((n) => n.requests());
    await sleep(windowS * 1000);
    const sent = nodes.reduce((sum, n, i) => sum + n.requests() - before[i]!, 0);
    out['steady requests/s per node'] = Math.round((sent / windowS / nodes.length) * 100) / 100;
    await Promise.all(cs.map((c) => c.stop()));
    await Promise.all(nodes.map((n) => n.close()));
    progress(`${store.name}: steady ${out['steady requests/s per node']} requests/s per node`);
  }
  // 1,000 leases in one group, all led by one process: the store's load once they all lead.
  {
    // A single job's lateness, by the server's clock (this host's: the servers run here).
    const node = store.backend();
    const leader = createCoordinator({ store: node.backend, lease: 'single', ttlMs: TTL, renewIntervalMs: RENEW, acquireRetryMs: RENEW });
    const late: number[] = [];
    const scheduler = createScheduler({ coordinator: leader, jobs: { single: { everyMs: 50, handler: (e: { scheduledAt: string }) => void late.push(Date.now() - Date.parse(e.scheduledAt)) } } });
    scheduler.start();
    await leader.start();
    await waitFor(() => leader.isLeader(), 10_000);
    await sleep(1000); // warm up
    late.length = 0;
    await sleep(windowS * 1000);
    await scheduler.stop();
    await leader.stop();
    await node.close();
    out['single job: fires'] = late.length;
    out['single job: lateness median ms'] = Math.round(median(late) * 10) / 10;
    out['single job: lateness p99 ms'] = Math.round(p99(late) * 10) / 10;
    out['single job: lateness max ms'] = Math.max(...late);
    progress(`${store.name}: single job lateness median ${out['single job: lateness median ms']} ms, p99 ${out['single job: lateness p99 ms']} ms`);
  }
  {
    // N jobs due in the same millisecond (every 10 s): one burst, from the due time to the last handler.
    const node = store.backend();
    const leader = createCoordinator({ store: node.backend, lease: 'burst', ttlMs: TTL, renewIntervalMs: RENEW, acquireRetryMs: RENEW });
    const lags = new Map<number, number[]>();
    const jobs = Object.fromEntries(
      Array.from({ length: jobCount }, (_, i) => [
        `job-${i}`,
        {
          everyMs: 10_000,
          handler: (e: { scheduledAt: string }) => {
            const due = Date.parse(e.scheduledAt);
            const list = lags.get(due) ?? [];
            list.push(Date.now() - due);
            lags.set(due, list);
          },
        },
      ]),
    );
    const scheduler = createScheduler({ coordinator: leader, jobs });
    scheduler.start();
    await leader.start();
    await waitFor(() => leader.isLeader(), 10_000);
    // The first burst due after it leads, whole.
    const ledAt = Date.now();
    const burst = () => [...lags].find(([due, list]) => due > ledAt && list.length === jobCount)?.[1];
    await waitFor(() => burst() !== undefined, 60_000);
    const lag = burst()!;
    await scheduler.stop();
    await leader.stop();
    await node.close();
    out[`${jobCount} jobs at once: median lag ms`] = Math.round(median(lag));
    out[`${jobCount} jobs at once: last fire after ms`] = Math.round(Math.max(...lag));
    progress(`${store.name}: ${jobCount} jobs due at once: the last fired ${out[`${jobCount} jobs at once: last fire after ms`]} ms after its due time`);
  }
  {
    const node = store.backend();
    const group = createLeaseGroup({ store: node.backend, group: 'many', shards: leaseCount, nodeId: 'solo', ttlMs: GROUP_TTL, renewIntervalMs: GROUP_RENEW });
    const startedAt = performance.now();
    await group.start();
    await waitFor(() => group.led().length === leaseCount, 120_000);
    out[`${leaseCount} leases: all led after ms`] = Math.round(performance.now() - startedAt);
    await sleep(GROUP_RENEW); // one renew round to align
    const before = await store.serverCpu();
    const sentBefore = node.requests();
    await sleep(windowS * 1000);
    const after = await store.serverCpu();
    // Per serving process: one that appeared meanwhile counts from zero.
    const cpu = [...after].reduce((sum, [id, seconds]) => sum + seconds - (before.get(id) ?? 0), 0);
    out[`${leaseCount} leases: requests/s sent`] = Math.round(((node.requests() - sentBefore) / windowS) * 100) / 100;
    out[`${leaseCount} leases: server CPU % of a core`] = Math.round((cpu / windowS) * 10000) / 100;
    out[`${leaseCount} leases: led at the end`] = group.led().length;
    await group.stop();
    await node.close();
    progress(`${store.name}: ${leaseCount} leases: ${out[`${leaseCount} leases: requests/s sent`]} requests/s sent, ${out[`${leaseCount} leases: server CPU % of a core`]} % of a core`);
  }
  return out;
}

const starts: Record<string, () => Promise<Store>> = {
  redis: redisStore,
  postgres: () => postgresStore(process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test'),
  mysql: () => mysqlStore(process.env['MYSQL_URL'] ?? 'mysql://root@127.0.0.1:3306/test'),
  etcd: etcdStore,
};
const chosen = args.stores.split(',').map((s) => s.trim());
const unknownStore = chosen.find((name) => starts[name] === undefined);
if (unknownStore !== undefined || chosen.length === 0) {
  process.stderr.write(`bench:leases: --stores takes ${Object.keys(starts).join(', ')}, not ${JSON.stringify(unknownStore ?? '')}\n`);
  process.exit(2);
}
const stores: Store[] = [];
for (const name of chosen) stores.push(await starts[name]!());
const results: Record<string, Record<string, number>> = {};
try {
  for (const store of stores) results[store.name] = await measure(store);
} finally {
  for (const store of stores) await store.close();
}

if (args.json) {
  process.stdout.write(`${JSON.stringify({ ttlMs: TTL, renewIntervalMs: RENEW, groupTtlMs: GROUP_TTL, groupRenewMs: GROUP_RENEW, results }, null, 2)}\n`);
} else {
  const rows = Object.keys(results[stores[0]!.name]!);
  const width = Math.max(...rows.map((r) => r.length));
  process.stdout.write(`lease stores side by side (TTL ${TTL} ms, renew ${RENEW} ms; the group: TTL ${GROUP_TTL} ms, renew ${GROUP_RENEW} ms)\n`);
  const names = stores.map((s) => s.name);
  process.stdout.write(`${''.padEnd(width)}${names.map((n) => `  ${n.padStart(10)}`).join('')}\n`);
  for (const row of rows) process.stdout.write(`${row.padEnd(width)}${names.map((n) => `  ${String(results[n]![row]).padStart(10)}`).join('')}\n`);
  process.stdout.write(`targets: graceful handover ≤ 50 ms; crash failover ≤ TTL + renew (${TTL + RENEW} ms); ${leaseCount} leases ≤ 5 % of a core\n`);
}
process.exit(0);
