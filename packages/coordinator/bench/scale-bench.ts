/**
 * pnpm bench:scale — many leases per process, balanced over processes, on a single Redis and on a
 * 6-node Redis Cluster side by side (both private servers on loopback, so counts are ours alone).
 *
 * Each member is a real process (scale-member.ts) with one lease group of N leases. Phases: a cold
 * start of P members at the same moment, a member joining, a member killed with SIGKILL. Measured:
 * connections per process per Redis node, memory per process, Redis commands/s and CPU per server in
 * steady state, time until every lease is led after the cold start, balance (most and fewest leases
 * led by one process) 2 × TTL after the start, the join and the crash, time until balanced within
 * ±10 % of N/P, and overlapping beliefs (two processes believing they lead one lease at once for
 * longer than the drift margin).
 *
 * Last, the P members left run a sharded schedule of J jobs (each every --job-every ms, over 30
 * shards of a second group): how many fires each dispatched in one period.
 *
 * Flags: --leases N (default 1000), --processes P (default 3), --ttl MS (default 5000),
 * --renew MS (default 1000), --jobs J (default 10000), --job-every MS (default 10000),
 * --topology single|cluster|both (default both), --json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { redisCommand, startRedisCluster, startRedisServer } from '@fenced/chaos';

const { values: args } = parseArgs({
  options: {
    leases: { type: 'string', default: '1000' },
    processes: { type: 'string', default: '3' },
    ttl: { type: 'string', default: '5000' },
    renew: { type: 'string', default: '1000' },
    topology: { type: 'string', default: 'both' },
    jobs: { type: 'string', default: '10000' },
    'job-every': { type: 'string', default: '10000' },
    json: { type: 'boolean', default: false },
  },
});
const N = Number(args.leases);
const P = Number(args.processes);
const TTL = Number(args.ttl);
const RENEW = Number(args.renew);
const JOBS = Number(args.jobs);
const JOB_EVERY = Number(args['job-every']);
const topologies: readonly string[] = args.topology === 'both' ? ['single', 'cluster'] : [args.topology!];
if (!(N >= 1) || !(P >= 2) || !(TTL > RENEW) || !(RENEW >= 10) || !(JOBS >= 0) || !(JOB_EVERY >= 100) || !topologies.every((t) => t === 'single' || t === 'cluster')) {
  process.stderr.write('usage: bench:scale [--leases N] [--processes P>=2] [--ttl MS] [--renew MS<TTL] [--jobs J] [--job-every MS] [--topology single|cluster|both] [--json]\n');
  process.exit(2);
}
const DRIFT = Math.ceil(TTL * 0.01) + 5;
const progress = (line: string) => {
  if (!args.json) process.stderr.write(`${line}\n`);
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const memberScript = fileURLToPath(new URL('./scale-member.ts', import.meta.url));

interface Member {
  readonly name: string;
  readonly child: ChildProcess;
  alive: boolean;
  rss: number;
  /** Fires of the sharded schedule this member dispatched so far. */
  dispatched: number;
  ready: Promise<void>;
}

/** Every belief interval, per lease, as the members report them (one host clock). */
class Beliefs {
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
    return led === N;
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

async function runTopology(topology: 'single' | 'cluster') {
  progress(`${topology}: starting Redis`);
  const single = topology === 'single' ? await startRedisServer() : undefined;
  const cluster = topology === 'cluster' ? await startRedisCluster() : undefined;
  const servers = single !== undefined ? [single] : cluster!.servers;
  const ports = servers.map((s) => s.port);
  const keyPrefix = `scale-${Date.now()}`;
  const beliefs = new Beliefs();
  const members: Member[] = [];

  const spawnMember = (name: string): Member => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', memberScript], {
      env: {
        ...process.env,
        MEMBER: name,
        REDIS_PORTS: ports.join(','),
        TOPOLOGY: topology,
        LEASES: String(N),
        TTL_MS: String(TTL),
        RENEW_MS: String(RENEW),
        KEY_PREFIX: keyPrefix,
        JOBS: String(JOBS),
        JOB_SHARDS: '30',
        JOB_EVERY_MS: String(JOB_EVERY),
      },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let markReady: () => void = () => {};
    const member: Member = { name, child, alive: true, rss: 0, dispatched: 0, ready: new Promise((r) => (markReady = r)) };
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const r = JSON.parse(line) as { kind: string; lease?: string; at: number; rss?: number; dispatched?: number };
      if (r.kind === 'ready') markReady();
      else if (r.kind === 'elected') beliefs.elected(r.lease!, name, r.at);
      else if (r.kind === 'lost') beliefs.lost(r.lease!, name, r.at, String((r as { reason?: string }).reason));
      else if (r.kind === 'stats') {
        member.rss = Math.max(member.rss, r.rss!);
        member.dispatched = r.dispatched ?? 0;
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

    // Steady state: connections, commands and CPU over 5 s.
    await sleep(1000);
    const infoOf = async (port: number) => String(await redisCommand(port, ['INFO', 'all'], 3000));
    const field = (info: string, name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)?.[1] ?? 0);
    const before = await Promise.all(ports.map(infoOf));
    const windowStart = performance.now();
    await sleep(5000);
    const after = await Promise.all(ports.map(infoOf));
    const windowS = (performance.now() - windowStart) / 1000;
    const perServer = ports.map((port, i) => ({
      port,
      commandsPerS: (field(after[i]!, 'total_commands_processed') - field(before[i]!, 'total_commands_processed')) / windowS,
      cpuPct: ((field(after[i]!, 'used_cpu_sys') + field(after[i]!, 'used_cpu_user') - field(before[i]!, 'used_cpu_sys') - field(before[i]!, 'used_cpu_user')) / windowS) * 100,
    }));
    let connections = 0;
    for (const port of ports) {
      const list = String(await redisCommand(port, ['CLIENT', 'LIST'], 3000)).split('\n');
      for (const m of first) connections = Math.max(connections, list.filter((l) => l.includes(` name=scale-${m.name} `)).length);
    }
    const rssMb = Math.max(...first.map((m) => m.rss)) / 1024 / 1024;

    // A member joins.
    const joiner = spawnMember(`m${P}`);
    await joiner.ready;
    progress(`${topology}: a process joins`);
    const joinedAt = Date.now();
    go([joiner]);
    const joinBalancedMs = await timeUntil(joinedAt, () => balanced(P + 1), 60_000);
    await sleep(Math.max(0, joinedAt + 2 * TTL - Date.now()));
    const afterJoin = balance();

    // A member dies.
    progress(`${topology}: a process is killed (SIGKILL)`);
    const victim = first[0]!;
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');
    victim.alive = false;
    beliefs.died(victim.name, killedAt);
    const crashBalanced = timeUntil(killedAt, () => balanced(P), 60_000);
    const crashLedMs = await timeUntil(killedAt, () => beliefs.allLed(), 60_000);
    const crashBalancedMs = await crashBalanced;
    await sleep(Math.max(0, killedAt + 2 * TTL - Date.now()));
    const afterCrash = balance();

    // The members left run a sharded schedule; count one period of fires each, after a first period
    // in which the shards are elected and balanced.
    let firesPerProcess: number[] = [];
    if (JOBS > 0) {
      progress(`${topology}: a sharded schedule of ${JOBS} jobs, every ${JOB_EVERY} ms`);
      const live = members.filter((m) => m.alive);
      for (const m of live) m.child.stdin!.write('jobs\n');
      await sleep(JOB_EVERY + 2000);
      const before = live.map((m) => m.dispatched);
      await sleep(JOB_EVERY);
      firesPerProcess = live.map((m, i) => m.dispatched - before[i]!);
    }

    return {
      topology,
      servers: ports.length,
      connectionsPerProcessPerNode: connections,
      rssMbPerProcess: Math.round(rssMb),
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
  }
}

const results: Array<Awaited<ReturnType<typeof runTopology>>> = [];
for (const topology of topologies) results.push(await runTopology(topology as 'single' | 'cluster'));

if (args.json) {
  process.stdout.write(`${JSON.stringify({ leases: N, processes: P, ttlMs: TTL, renewIntervalMs: RENEW, results }, null, 2)}\n`);
} else {
  const ms = (v: number | null) => (v === null ? 'never' : `${v} ms`);
  const bal = (b: Balance) => `${b.most} / ${b.fewest}`;
  const rows: Array<[string, (r: (typeof results)[number]) => string, string]> = [
    ['Redis servers', (r) => String(r.servers), ''],
    ['connections per process per Redis node (max)', (r) => String(r.connectionsPerProcessPerNode), '<= 3'],
    ['memory per process, RSS (max)', (r) => `${r.rssMbPerProcess} MB`, '<= 200 MB'],
    ['Redis commands/s, all servers, steady', (r) => String(r.commandsPerS), ''],
    ['Redis CPU, busiest server, steady', (r) => `${r.maxCpuPctPerServer.toFixed(1)} % of a core`, '<= 5 %'],
    ['every lease led after a cold start of all', (r) => ms(r.allLedAfterColdStartMs), `<= TTL + 1 s = ${TTL + 1000} ms`],
    ['balanced (±10 %) after the cold start', (r) => ms(r.balancedAfterColdStartMs), ''],
    [`most / fewest leases per process, 2 × TTL after start (N/P = ${Math.round(N / P)})`, (r) => bal(r.afterStart), `±10 %`],
    ['balanced (±10 %) after a join', (r) => ms(r.joinBalancedMs), `<= 2 × TTL = ${2 * TTL} ms`],
    [`most / fewest, 2 × TTL after the join (N/P = ${Math.round(N / (P + 1))})`, (r) => bal(r.afterJoin), '±10 %'],
    ['every lease led again after a SIGKILL', (r) => ms(r.crashAllLedMs), `<= TTL + renew = ${TTL + RENEW} ms`],
    ['balanced (±10 %) after the SIGKILL', (r) => ms(r.crashBalancedMs), `<= 2 × TTL = ${2 * TTL} ms`],
    [`most / fewest, 2 × TTL after the SIGKILL (N/P = ${Math.round(N / P)})`, (r) => bal(r.afterCrash), '±10 %'],
    ['overlapping beliefs (> drift margin)', (r) => String(r.overlaps.length), '0'],
    [`sharded schedule, ${JOBS} jobs: fires per process in one period`, (r) => r.firesPerProcess.join(' / '), `every process > 0, sum ≈ ${JOBS}`],
  ];
  const header = ['', ...results.map((r) => r.topology), 'target'];
  const table = [header, ...rows.map(([label, value, target]) => [label, ...results.map(value), target])];
  const widths = header.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  process.stdout.write(`scale benchmark: ${N} leases, ${P} processes (+1 joining), TTL ${TTL} ms, renew ${RENEW} ms\n`);
  for (const row of table) process.stdout.write(`${row.map((c, i) => c.padEnd(widths[i]!)).join('  ')}\n`);
  for (const r of results) {
    if (r.overlaps.length > 0) process.stdout.write(`phases (${r.topology}, ms mod 100000): ${JSON.stringify(r.phases)}\n`);
    for (const overlap of r.overlaps.slice(0, 10)) process.stdout.write(`overlap (${r.topology}): ${overlap}\n`);
  }
}
