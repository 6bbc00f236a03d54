/**
 * pnpm bench:scale — many leases per process, balanced over processes, on a single Redis, on a
 * 6-node Redis Cluster (both private servers on loopback, so counts are ours alone), on the
 * PostgreSQL lease store (a schema of its own on DATABASE_URL, default the local server), on the
 * MySQL/MariaDB lease store (a database of its own on MYSQL_URL, default the local server) and on
 * etcd (a private three-member cluster on loopback) side by side.
 *
 * Each member is a real process (scale-member.ts) with one lease group of N leases, for each N of
 * --leases (columns side by side). Phases: a cold start of P members at the same moment, a member
 * joining, a member killed with SIGKILL, then --cycles more join-and-kill cycles. Measured:
 * connections per process per server, memory per process (RSS, beside the floor: the same process
 * with its modules loaded and no group yet), requests/s and CPU per server in steady state (Redis:
 * INFO; PostgreSQL: the transactions of the database and /proc of the members' backends; MySQL: the
 * statements the server ran (Questions) and /proc of its one process, everything it served; etcd: the
 * gRPC messages each member received, from its /metrics, and /proc of its process), time until every lease is led after the cold start, balance (most and fewest leases led by
 * one process) 2 × TTL after the start, the join and the crash, time until balanced within ±10 % of
 * N/P, how long each lease handed over at the join was leaderless (p50 / p99 / max) and how many were
 * leaderless at once, the takeover after the SIGKILL, the heap of the surviving members after a
 * garbage collection at the end of each cycle (flat, or a leak), and overlapping beliefs (two
 * processes believing they lead one lease at once for longer than the drift margin).
 *
 * Last, the P members left run a sharded schedule of J jobs (each every --job-every ms, over 30
 * shards of a second group): how many fires each dispatched in one period, once the shards are shared.
 *
 * Flags: --leases N[,N…] (default 1000,10000), --processes P (default 3), --ttl MS (default 15000),
 * --renew MS (default 5000), --cycles C (default 3), --jobs J (default 10000), --job-every MS
 * (default 10000), --topology single|cluster|postgres|mysql|etcd|both|all, or several joined by
 * commas (default all: both Redis ones, PostgreSQL, MySQL and etcd), --json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cpuSecondsOf } from './process-cpu.js';
import pg from 'pg';
import { connectionsTo, redisCommand, startEtcdCluster, startRedisCluster, startRedisServer, type EtcdCluster } from '@fenced/chaos';
import { postgresLeases } from '@fenced/coordinator/postgres';
import { mysqlLeases } from '@fenced/coordinator/mysql';
import mysql from 'mysql2/promise';
import { readFileSync } from 'node:fs';

const { values: args } = parseArgs({
  options: {
    leases: { type: 'string', default: '1000,10000' },
    processes: { type: 'string', default: '3' },
    ttl: { type: 'string', default: '15000' },
    renew: { type: 'string', default: '5000' },
    cycles: { type: 'string', default: '3' },
    topology: { type: 'string', default: 'all' },
    jobs: { type: 'string', default: '10000' },
    'job-every': { type: 'string', default: '10000' },
    json: { type: 'boolean', default: false },
  },
});
const SIZES = args.leases!.split(',').map(Number);
const P = Number(args.processes);
const CYCLES = Number(args.cycles);
const TTL = Number(args.ttl);
const RENEW = Number(args.renew);
const JOBS = Number(args.jobs);
const JOB_EVERY = Number(args['job-every']);
const TOPOLOGIES = ['single', 'cluster', 'postgres', 'mysql', 'etcd'] as const;
const topologies: readonly string[] = args.topology === 'all' ? TOPOLOGIES : args.topology === 'both' ? ['single', 'cluster'] : args.topology!.split(',');
if (!SIZES.every((n) => Number.isInteger(n) && n >= 1) || !(P >= 2) || !(Number.isInteger(CYCLES) && CYCLES >= 0) || !(TTL > RENEW) || !(RENEW >= 10) || !(JOBS >= 0) || !(JOB_EVERY >= 100) || !topologies.every((t) => (TOPOLOGIES as readonly string[]).includes(t))) {
  process.stderr.write('usage: bench:scale [--leases N[,N…]] [--processes P>=2] [--ttl MS] [--renew MS<TTL] [--cycles C] [--jobs J] [--job-every MS] [--topology single|cluster|postgres|mysql|etcd|both|all[,…]] [--json]\n');
  process.exit(2);
}
const DRIFT = Math.ceil(TTL * 0.01) + 5;
/** Shards of the sharded schedule's own group. */
const JOB_SHARDS = 30;
const progress = (line: string) => {
  if (!args.json) process.stderr.write(`${line}\n`);
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const memberScript = fileURLToPath(new URL('./scale-member.ts', import.meta.url));

interface Member {
  readonly name: string;
  readonly child: ChildProcess;
  alive: boolean;
  /** When the parent killed it (host clock). */
  killedAt?: number;
  rss: number;
  /** RSS with the modules loaded and nothing made yet: the floor of `rss`. */
  loadedRss: number;
  /** The heap after a garbage collection, each time the parent asked (MB). */
  heaps: number[];
  heapAsked: (() => void) | undefined;
  /** Fires of the sharded schedule this member dispatched so far. */
  dispatched: number;
  /** Shards of the schedule's group it leads, as of its last stats line. */
  jobShardsLed: number;
  ready: Promise<void>;
}

/** Every belief interval, per lease, as the members report them (one host clock). */
class Beliefs {
  constructor(readonly leases: number) {}
  readonly open = new Map<string, Map<string, number>>();
  readonly closed: Array<{ lease: string; member: string; from: number; until: number; reason?: string }> = [];
  elected(lease: string, member: string, at: number): void {
    let holders = this.open.get(lease);
    if (holders === undefined) this.open.set(lease, (holders = new Map()));
    holders.set(member, at);
  }
  lost(lease: string, member: string, at: number, reason: string): void {
    const from = this.open.get(lease)?.get(member);
    if (from === undefined) return;
    this.open.get(lease)!.delete(member);
    this.closed.push({ lease, member, from, until: at, reason });
  }
  /** A killed process acts no more from the moment of the kill. */
  died(member: string, at: number): void {
    for (const [lease, holders] of this.open) if (holders.has(member)) this.lost(lease, member, at, 'killed');
  }
  ledBy(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const holders of this.open.values()) for (const m of holders.keys()) counts.set(m, (counts.get(m) ?? 0) + 1);
    return counts;
  }
  allLed(): boolean {
    let led = 0;
    for (const holders of this.open.values()) if (holders.size > 0) led++;
    return led === this.leases;
  }
  /**
   * Leases handed over whose old term ended in [from, until): how long each stayed leaderless (until
   * another member's term began), and the most leaderless at the same moment.
   */
  handoverGaps(from: number, until: number): { gaps: number[]; mostAtOnce: number } {
    const next = new Map<string, number[]>();
    for (const b of this.closed) next.set(b.lease, [...(next.get(b.lease) ?? []), b.from]);
    for (const [lease, holders] of this.open) for (const at of holders.values()) next.set(lease, [...(next.get(lease) ?? []), at]);
    const gaps: number[] = [];
    const edges: Array<[number, number]> = [];
    for (const b of this.closed) {
      if (!b.reason?.includes('handover') || b.until < from || b.until >= until) continue;
      const after = (next.get(b.lease) ?? []).filter((at) => at >= b.until - DRIFT);
      if (after.length === 0) continue;
      const taken = Math.min(...after);
      gaps.push(Math.max(0, taken - b.until));
      edges.push([b.until, 1], [taken, -1]);
    }
    edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    let now = 0;
    let mostAtOnce = 0;
    for (const [, d] of edges) mostAtOnce = Math.max(mostAtOnce, (now += d));
    return { gaps: gaps.sort((a, b) => a - b), mostAtOnce };
  }
  /** Overlapping pairs, each described (lease, members, how the earlier belief ended, how long). */
  overlaps(): string[] {
    const all: Beliefs['closed'] = [...this.closed, ...[...this.open].flatMap(([lease, holders]) => [...holders].map(([member, from]) => ({ lease, member, from, until: Date.now() })))];
    const byLease = new Map<string, typeof all>();
    for (const b of all) byLease.set(b.lease, [...(byLease.get(b.lease) ?? []), b]);
    const found: string[] = [];
    for (const list of byLease.values()) {
      for (let i = 0; i < list.length; i++) {
        for (let j = i + 1; j < list.length; j++) {
          const [a, b] = [list[i]!, list[j]!].sort((x, y) => x.from - y.from) as [(typeof all)[number], (typeof all)[number]];
          const overlap = Math.min(a.until, b.until) - Math.max(a.from, b.from);
          // 5 ms more than the drift margin: the members' own stamping of the same clock.
          if (a.member !== b.member && overlap > DRIFT + 5) {
            found.push(`${a.lease}: ${a.member} (${a.reason ?? 'still leading'}) and ${b.member} for ${overlap} ms, from ${a.from % 100000} / ${b.from % 100000}`);
          }
        }
      }
    }
    return found;
  }
}

interface Balance {
  most: number;
  fewest: number;
}

const quantile = (sorted: readonly number[], q: number): number | null => (sorted.length === 0 ? null : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!);

type Topology = (typeof TOPOLOGIES)[number];

/** What the steady state costs the servers, read twice around a window: Redis's INFO, or PostgreSQL's counters. */
interface ServerLoad {
  /** Requests executed so far (Redis: commands; PostgreSQL: transactions, one per statement here), CPU seconds so far, per server. */
  sample(): Promise<Array<{ requests: number; cpuSeconds: number }>>;
  /** The most connections one member process holds to one server. */
  connectionsPerProcess(members: readonly Member[]): Promise<number>;
}

function redisLoad(ports: readonly number[]): ServerLoad {
  const infoOf = async (port: number) => String(await redisCommand(port, ['INFO', 'all'], 3000));
  const field = (info: string, name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)?.[1] ?? 0);
  return {
    async sample() {
      const infos = await Promise.all(ports.map(infoOf));
      return infos.map((info) => ({ requests: field(info, 'total_commands_processed'), cpuSeconds: field(info, 'used_cpu_sys') + field(info, 'used_cpu_user') }));
    },
    async connectionsPerProcess(members) {
      let most = 0;
      for (const port of ports) {
        const list = String(await redisCommand(port, ['CLIENT', 'LIST'], 3000)).split('\n');
        for (const m of members) most = Math.max(most, list.filter((l) => l.includes(` name=scale-${m.name} `)).length);
      }
      return most;
    },
  };
}

/** The members' backends (application_name scale-<member>): their CPU from /proc, the database's transactions. */
function postgresLoad(admin: pg.Pool): ServerLoad {
  return {
    async sample() {
      const pids = (await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'scale-%'`)).rows.map((r) => r.pid);
      const [{ xacts }] = (await admin.query<{ xacts: string }>(`SELECT (xact_commit + xact_rollback)::text AS xacts FROM pg_stat_database WHERE datname = current_database()`)).rows as [{ xacts: string }];
      return [{ requests: Number(xacts), cpuSeconds: pids.reduce((sum, pid) => sum + cpuSecondsOf(pid), 0) }];
    },
    async connectionsPerProcess(members) {
      const rows = (await admin.query<{ app: string; n: number }>(`SELECT application_name AS app, count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'scale-%' GROUP BY 1`)).rows;
      return Math.max(0, ...rows.filter((r) => members.some((m) => m.name === r.app.slice('scale-'.length))).map((r) => r.n));
    },
  };
}

/**
 * The server's statements (Questions: every statement any client sent, the bench's own few samples
 * included) and its one process's CPU from /proc (all it served; run the bench on a quiet server);
 * connections counted on the member processes' side, to the server's port.
 */
async function mysqlLoad(admin: mysql.Pool, port: number): Promise<ServerLoad> {
  const pidFile = String(((await admin.query('SELECT @@pid_file AS f'))[0] as Array<{ f: string }>)[0]!.f);
  const serverPid = Number(readFileSync(pidFile, 'utf8').trim());
  return {
    async sample() {
      const [rows] = await admin.query("SHOW GLOBAL STATUS LIKE 'Questions'");
      return [{ requests: Number((rows as Array<{ Value: string }>)[0]!.Value), cpuSeconds: cpuSecondsOf(serverPid) }];
    },
    async connectionsPerProcess(members) {
      let most = 0;
      for (const m of members) if (m.alive && m.child.pid !== undefined) for (const n of (await connectionsTo(m.child.pid, [port])).values()) most = Math.max(most, n);
      return most;
    },
  };
}

/**
 * Each member's gRPC messages received (every unary request and every message on a stream, a
 * keep-alive included), from its Prometheus /metrics, and its process's CPU from /proc; connections
 * are counted on the member processes' side (etcd cannot name its clients), to each member's proxy.
 */
function etcdLoad(cluster: EtcdCluster): ServerLoad {
  const received = async (url: string) => {
    const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(3000) })).text();
    let sum = 0;
    for (const line of text.split('\n')) if (line.startsWith('grpc_server_msg_received_total{')) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    return sum;
  };
  const proxyPorts = cluster.endpoints.map((e) => Number(new URL(e).port));
  return {
    async sample() {
      return Promise.all(cluster.members.map(async (m) => ({ requests: await received(m.directClientUrl), cpuSeconds: m.pid === undefined ? 0 : cpuSecondsOf(m.pid) })));
    },
    async connectionsPerProcess(members) {
      let most = 0;
      for (const m of members) if (m.child.pid !== undefined) for (const n of (await connectionsTo(m.child.pid, proxyPorts)).values()) most = Math.max(most, n);
      return most;
    },
  };
}

async function runTopology(topology: Topology, N: number) {
  progress(`${topology}, ${N} leases: starting ${topology === 'postgres' ? 'a schema on DATABASE_URL' : topology === 'mysql' ? 'a database on MYSQL_URL' : topology === 'etcd' ? 'etcd' : 'Redis'}`);
  const single = topology === 'single' ? await startRedisServer() : undefined;
  const etcd = topology === 'etcd' ? await startEtcdCluster() : undefined;
  const cluster = topology === 'cluster' ? await startRedisCluster() : undefined;
  const servers = single !== undefined ? [single] : (cluster?.servers ?? []);
  const ports = servers.map((s) => s.port);
  const databaseUrl = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
  const schema = `bench_scale_${process.pid}_${N}`;
  const admin = topology === 'postgres' ? new pg.Pool({ connectionString: databaseUrl, max: 2 }) : undefined;
  if (admin !== undefined) {
    admin.on('error', () => {});
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE; CREATE SCHEMA ${schema}`);
    await postgresLeases({ pool: admin, schema }).migrate();
  }
  const mysqlUrl = new URL(process.env['MYSQL_URL'] ?? 'mysql://root@127.0.0.1:3306/test');
  const mysqlAdmin = topology === 'mysql' ? mysql.createPool({ uri: mysqlUrl.toString(), connectionLimit: 2 }) : undefined;
  if (mysqlAdmin !== undefined) {
    await mysqlAdmin.query(`DROP DATABASE IF EXISTS ${schema}`);
    await mysqlAdmin.query(`CREATE DATABASE ${schema}`);
    await mysqlLeases({ pool: mysqlAdmin, database: schema }).migrate();
  }
  const load =
    admin !== undefined ? postgresLoad(admin) : mysqlAdmin !== undefined ? await mysqlLoad(mysqlAdmin, Number(mysqlUrl.port || 3306)) : etcd !== undefined ? etcdLoad(etcd) : redisLoad(ports);
  const keyPrefix = `scale-${Date.now()}`;
  const beliefs = new Beliefs(N);
  const members: Member[] = [];

  const spawnMember = (name: string): Member => {
    const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', '--conditions=@fenced/source', memberScript], {
      env: {
        ...process.env,
        MEMBER: name,
        REDIS_PORTS: ports.join(','),
        ETCD_ENDPOINTS: etcd?.endpoints.join(',') ?? '',
        TOPOLOGY: topology,
        DATABASE_URL: databaseUrl,
        MYSQL_URL: Object.assign(new URL(mysqlUrl), { pathname: `/${schema}` }).toString(),
        SCHEMA: schema,
        LEASES: String(N),
        TTL_MS: String(TTL),
        RENEW_MS: String(RENEW),
        KEY_PREFIX: keyPrefix,
        JOBS: String(JOBS),
        JOB_SHARDS: String(JOB_SHARDS),
        JOB_EVERY_MS: String(JOB_EVERY),
      },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let markReady: () => void = () => {};
    const member: Member = { name, child, alive: true, rss: 0, loadedRss: 0, heaps: [], heapAsked: undefined, dispatched: 0, jobShardsLed: 0, ready: new Promise((r) => (markReady = r)) };
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const r = JSON.parse(line) as { kind: string; lease?: string; at: number; rss?: number; dispatched?: number; jobShardsLed?: number; heapUsed?: number | null };
      if (r.kind === 'ready') markReady();
      else if (r.kind === 'loaded') member.loadedRss = r.rss!;
      else if (r.kind === 'heap') {
        member.heaps.push(Math.round((r.heapUsed ?? Number.NaN) / 1024 / 1024));
        member.heapAsked?.();
      }
      // A line written before the kill can be read after it: a killed member's belief ends at its kill.
      else if (r.kind === 'elected' && member.killedAt !== undefined) {
        if (r.at < member.killedAt) beliefs.closed.push({ lease: r.lease!, member: name, from: r.at, until: member.killedAt, reason: 'killed' });
      } else if (r.kind === 'elected') beliefs.elected(r.lease!, name, r.at);
      else if (r.kind === 'lost') beliefs.lost(r.lease!, name, r.at, String((r as { reason?: string }).reason));
      else if (r.kind === 'stats') {
        member.rss = Math.max(member.rss, r.rss!);
        member.dispatched = r.dispatched ?? 0;
        member.jobShardsLed = r.jobShardsLed ?? 0;
      }
    });
    members.push(member);
    return member;
  };
  const go = (ms: readonly Member[]) => {
    for (const m of ms) m.child.stdin!.write('go\n');
  };
  const balance = (): Balance => {
    const counts = beliefs.ledBy();
    const loads = members.filter((m) => m.alive).map((m) => counts.get(m.name) ?? 0);
    return { most: Math.max(...loads), fewest: Math.min(...loads) };
  };
  const balanced = (live: number) => {
    const { most, fewest } = balance();
    return beliefs.allLed() && most <= (N / live) * 1.1 && fewest >= (N / live) * 0.9;
  };
  /** Ms from `since` until `condition` holds (polled), or null after `limitMs`. */
  const timeUntil = async (since: number, condition: () => boolean, limitMs: number): Promise<number | null> => {
    while (!condition()) {
      if (Date.now() - since > limitMs) return null;
      await sleep(10);
    }
    return Date.now() - since;
  };

  try {
    // Cold start: P members, all told to join at the same moment.
    const first = Array.from({ length: P }, (_, i) => spawnMember(`m${i}`));
    await Promise.all(first.map((m) => m.ready));
    progress(`${topology}: cold start of ${P} processes with ${N} leases`);
    const startedAt = Date.now();
    go(first);
    const startBalanced = timeUntil(startedAt, () => balanced(P), 60_000);
    const allLedMs = await timeUntil(startedAt, () => beliefs.allLed(), 60_000);
    await sleep(Math.max(0, startedAt + 2 * TTL - Date.now()));
    const afterStart = balance();
    const startBalancedMs = await startBalanced;

    // Steady state: connections, requests and CPU over 5 s.
    await sleep(1000);
    const before = await load.sample();
    const windowStart = performance.now();
    await sleep(5000);
    const after = await load.sample();
    const windowS = (performance.now() - windowStart) / 1000;
    const perServer = after.map((a, i) => ({
      commandsPerS: (a.requests - before[i]!.requests) / windowS,
      cpuPct: ((a.cpuSeconds - before[i]!.cpuSeconds) / windowS) * 100,
    }));
    const connections = await load.connectionsPerProcess(first);
    const rssMb = Math.max(...first.map((m) => m.rss)) / 1024 / 1024;
    const loadedRssMb = Math.max(...first.map((m) => m.loadedRss)) / 1024 / 1024;
    const askHeaps = async (ms: readonly Member[]) => {
      await Promise.all(ms.map((m) => new Promise<void>((resolve) => {
        m.heapAsked = resolve;
        m.child.stdin!.write('heap\n');
      })));
      for (const m of ms) m.heapAsked = undefined;
    };
    await askHeaps(first);

    // A member joins.
    const joiner = spawnMember(`m${P}`);
    await joiner.ready;
    progress(`${topology}, ${N} leases: a process joins`);
    const joinedAt = Date.now();
    go([joiner]);
    const joinBalancedMs = await timeUntil(joinedAt, () => balanced(P + 1), 60_000);
    await sleep(Math.max(0, joinedAt + 2 * TTL - Date.now()));
    const afterJoin = balance();
    const joinHandovers = beliefs.handoverGaps(joinedAt, Date.now());

    // A member dies.
    progress(`${topology}, ${N} leases: a process is killed (SIGKILL)`);
    const victim = first[0]!;
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');
    victim.alive = false;
    victim.killedAt = killedAt;
    beliefs.died(victim.name, killedAt);
    const crashBalanced = timeUntil(killedAt, () => balanced(P), 60_000);
    const crashLedMs = await timeUntil(killedAt, () => beliefs.allLed(), 60_000);
    const crashBalancedMs = await crashBalanced;
    await sleep(Math.max(0, killedAt + 2 * TTL - Date.now()));
    const afterCrash = balance();

    // Join-and-kill cycles: a member joins, and once balanced it is killed; the members that live
    // through every cycle report their heap after each one (garbage collected first).
    const survivors = members.filter((m) => m.alive);
    for (const m of survivors) m.heaps = [];
    await askHeaps(survivors);
    const cycleTakeoversMs: Array<number | null> = [];
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      progress(`${topology}, ${N} leases: cycle ${cycle + 1} of ${CYCLES} (a process joins, then is killed)`);
      const newcomer = spawnMember(`c${cycle}`);
      await newcomer.ready;
      const at = Date.now();
      go([newcomer]);
      await timeUntil(at, () => balanced(P + 1), 60_000);
      const killed = Date.now();
      newcomer.child.kill('SIGKILL');
      newcomer.alive = false;
      newcomer.killedAt = killed;
      beliefs.died(newcomer.name, killed);
      cycleTakeoversMs.push(await timeUntil(killed, () => balanced(P), 60_000));
      await askHeaps(survivors);
    }

    // The members left run a sharded schedule; count one period of fires each, after a first period
    // in which the shards are elected and balanced.
    let firesPerProcess: number[] = [];
    let leasesOnlyRssMb = Math.max(...members.map((m) => m.rss)) / 1024 / 1024;
    if (JOBS > 0) {
      progress(`${topology}, ${N} leases: a sharded schedule of ${JOBS} jobs, every ${JOB_EVERY} ms`);
      const live = members.filter((m) => m.alive);
      leasesOnlyRssMb = Math.max(...members.map((m) => m.rss)) / 1024 / 1024;
      for (const m of live) m.child.stdin!.write('jobs\n');
      // Counted once the shards are shared out (each member within ±10 % of its share), from the next period.
      const jobsFrom = Date.now();
      await timeUntil(jobsFrom, () => live.reduce((sum, m) => sum + m.jobShardsLed, 0) === JOB_SHARDS && live.every((m) => Math.abs(m.jobShardsLed - JOB_SHARDS / live.length) <= Math.max(1, JOB_SHARDS / live.length / 10)), 60_000);
      await sleep(JOB_EVERY);
      const before = live.map((m) => m.dispatched);
      await sleep(JOB_EVERY);
      firesPerProcess = live.map((m, i) => m.dispatched - before[i]!);
    }

    return {
      topology,
      leases: N,
      servers: topology === 'postgres' || topology === 'mysql' ? 1 : topology === 'etcd' ? etcd!.members.length : ports.length,
      connectionsPerProcessPerNode: connections,
      rssMbPerProcess: Math.round(Math.max(rssMb, leasesOnlyRssMb)),
      rssMbWithJobs: Math.round(Math.max(...members.map((m) => m.rss / 1024 / 1024))),
      loadedRssMbPerProcess: Math.round(loadedRssMb),
      joinHandoverGapMs: { p50: quantile(joinHandovers.gaps, 0.5), p99: quantile(joinHandovers.gaps, 0.99), max: quantile(joinHandovers.gaps, 1), handedOver: joinHandovers.gaps.length },
      joinLeaderlessAtOnce: joinHandovers.mostAtOnce,
      cycleTakeoversMs,
      survivorHeapsMb: survivors.map((m) => m.heaps),
      commandsPerS: Math.round(perServer.reduce((s, x) => s + x.commandsPerS, 0)),
      maxCpuPctPerServer: Math.max(...perServer.map((x) => x.cpuPct)),
      allLedAfterColdStartMs: allLedMs,
      balancedAfterColdStartMs: startBalancedMs,
      afterStart,
      joinBalancedMs,
      afterJoin,
      crashAllLedMs: crashLedMs,
      crashBalancedMs,
      afterCrash,
      overlaps: beliefs.overlaps(),
      firesPerProcess,
      phases: { startedAt: startedAt % 100000, joinedAt: joinedAt % 100000, killedAt: killedAt % 100000 },
    };
  } finally {
    for (const m of members) if (m.alive) m.child.kill('SIGKILL');
    await Promise.all(members.map((m) => (m.child.exitCode !== null || m.child.signalCode !== null ? undefined : new Promise((r) => m.child.once('exit', r)))));
    await single?.stop();
    await cluster?.stop();
    await etcd?.stop();
    if (mysqlAdmin !== undefined) {
      await mysqlAdmin.query(`DROP DATABASE IF EXISTS ${schema}`).catch(() => undefined);
      await mysqlAdmin.end();
    }
    if (admin !== undefined) {
      await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
      await admin.end();
    }
  }
}

const results: Array<Awaited<ReturnType<typeof runTopology>>> = [];
for (const topology of topologies) for (const n of SIZES) results.push(await runTopology(topology as Topology, n));

if (args.json) {
  process.stdout.write(`${JSON.stringify({ leases: SIZES, processes: P, ttlMs: TTL, renewIntervalMs: RENEW, results }, null, 2)}\n`);
} else {
  const ms = (v: number | null) => (v === null ? 'never' : `${v} ms`);
  const bal = (b: Balance) => `${b.most} / ${b.fewest}`;
  const rows: Array<[string, (r: (typeof results)[number]) => string, string]> = [
    ['servers', (r) => String(r.servers), ''],
    ['connections per process per server (max)', (r) => String(r.connectionsPerProcessPerNode), '<= 3 (Redis), <= 4 (PostgreSQL, MySQL: their pools), 1 (etcd)'],
    ['memory per process, RSS (max, the lease group alone)', (r) => `${r.rssMbPerProcess} MB`, '<= 250 MB'],
    [`  with the sharded schedule of ${JOBS} jobs too`, (r) => `${r.rssMbWithJobs} MB`, ''],
    ['  floor: the same process, modules loaded, no group yet', (r) => `${r.loadedRssMbPerProcess} MB`, ''],
    ['requests/s, all servers, steady (Redis: commands; PostgreSQL: transactions; MySQL: statements; etcd: gRPC messages)', (r) => String(r.commandsPerS), ''],
    ['server CPU, busiest server, steady (PostgreSQL: the members\' backends)', (r) => `${r.maxCpuPctPerServer.toFixed(1)} % of a core`, '<= 5 %'],
    ['every lease led after a cold start of all', (r) => ms(r.allLedAfterColdStartMs), `<= TTL + 1 s = ${TTL + 1000} ms`],
    ['balanced (±10 %) after the cold start', (r) => ms(r.balancedAfterColdStartMs), ''],
    ['most / fewest leases per process, 2 × TTL after start', (r) => `${bal(r.afterStart)} (N/P ${Math.round(r.leases / P)})`, `±10 %`],
    ['balanced (±10 %) after a join', (r) => ms(r.joinBalancedMs), `<= 2 × TTL = ${2 * TTL} ms`],
    ['most / fewest, 2 × TTL after the join', (r) => `${bal(r.afterJoin)} (N/P ${Math.round(r.leases / (P + 1))})`, '±10 %'],
    ['join: leases handed over', (r) => String(r.joinHandoverGapMs.handedOver), ''],
    ['join: leaderless per handover, p50 / p99 / max', (r) => `${r.joinHandoverGapMs.p50} / ${r.joinHandoverGapMs.p99} / ${r.joinHandoverGapMs.max} ms`, 'p99 <= 100 ms'],
    ['join: leases leaderless at once (max)', (r) => String(r.joinLeaderlessAtOnce), ''],
    ['every lease led again after a SIGKILL', (r) => ms(r.crashAllLedMs), `<= TTL + renew - 1 s = ${TTL + RENEW - 1000} ms`],
    ['balanced (±10 %) after the SIGKILL', (r) => ms(r.crashBalancedMs), `<= 2 × TTL = ${2 * TTL} ms`],
    ['most / fewest, 2 × TTL after the SIGKILL', (r) => `${bal(r.afterCrash)} (N/P ${Math.round(r.leases / P)})`, '±10 %'],
    [`join-and-kill cycles: balanced again after each kill`, (r) => r.cycleTakeoversMs.map(ms).join(' / '), `each <= ${TTL + RENEW - 1000} ms`],
    ['heap of each survivor after GC: before the cycles, then after each', (r) => r.survivorHeapsMb.map((h) => h.join('→')).join(', ') + ' MB', 'flat'],
    ['overlapping beliefs (> drift margin)', (r) => String(r.overlaps.length), '0'],
    [`sharded schedule, ${JOBS} jobs: fires per process in one period`, (r) => r.firesPerProcess.join(' / '), `every process > 0, sum ≈ ${JOBS}`],
  ];
  const header = ['', ...results.map((r) => `${r.topology}, ${r.leases} leases`), 'target'];
  const table = [header, ...rows.map(([label, value, target]) => [label, ...results.map(value), target])];
  const widths = header.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  process.stdout.write(`scale benchmark: ${SIZES.join(' and ')} leases, ${P} processes (+1 joining), TTL ${TTL} ms, renew ${RENEW} ms, ${CYCLES} join-and-kill cycles\n`);
  for (const row of table) process.stdout.write(`${row.map((c, i) => c.padEnd(widths[i]!)).join('  ')}\n`);
  for (const r of results) {
    if (r.overlaps.length > 0) process.stdout.write(`phases (${r.topology}, ${r.leases}, ms mod 100000): ${JSON.stringify(r.phases)}\n`);
    for (const overlap of r.overlaps.slice(0, 10)) process.stdout.write(`overlap (${r.topology}): ${overlap}\n`);
  }
}
