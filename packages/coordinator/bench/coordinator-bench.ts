/**
 * pnpm bench:coordinator — failover times, steady-state Redis load, a single job's lateness, and
 * dispatch capacity. (The recovery after Redis lost its records runs next, in
 * test/bench/recovery-bench.ts, since it needs the guard too.)
 *
 * Lateness is measured against this host's clock: the redis-server is ours, on this host, so the
 * server's clock (the one fires are due by) is this host's clock.
 * Runs against a private redis-server it starts on a free loopback port (so the command counts are
 * ours alone). Flags: --rounds N (failovers of each kind, default 10), --jobs N (default 10000),
 * --seconds S (dispatch measurement, default 10), --concurrency C1,C2 (the scheduler's, one dispatch
 * run each, default 1024,10000), --json.
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { createCoordinator, createScheduler, type Coordinator } from '@fenced/coordinator';
import { createEnvelope, parseToken, type Envelope } from '@fenced/shared';
import { startRedisServer } from '@fenced/chaos';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '10' },
    jobs: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '1024,10000' },
    json: { type: 'boolean', default: false },
  },
});
const rounds = Number(args.rounds);
const jobCount = Number(args.jobs);
const seconds = Number(args.seconds);
const concurrencies = args.concurrency.split(',').map(Number);
if (!(rounds >= 1) || !(jobCount >= 1) || !(seconds > 0) || !concurrencies.every((c) => Number.isInteger(c) && c >= 1)) {
  process.stderr.write('usage: bench:coordinator [--rounds N] [--jobs N] [--seconds S] [--concurrency C1,C2] [--json]\n');
  process.exit(2);
}

const TTL = 1000;
const RENEW = 250;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const progress = (line: string) => {
  if (!args.json) process.stderr.write(`${line}\n`);
};
const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return { median: s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2, p99: at(0.99), max: s[s.length - 1]! };
};

const server = await startRedisServer();
const clients: Redis[] = [];
const client = (): Redis => {
  const r = new Redis(server.url, { maxRetriesPerRequest: 1 });
  r.on('error', () => {});
  clients.push(r);
  return r;
};

function node(name: string, redis = client()): Coordinator {
  return createCoordinator({ redis, lease: name, ttlMs: TTL, renewIntervalMs: RENEW, acquireRetryMs: RENEW });
}

/** Time from the leader's end (crash or stop) until a standby reports 'elected'. */
async function failover(kind: 'crash' | 'graceful', round: number): Promise<number> {
  const leaderRedis = client();
  const leader = node(`fo-${kind}-${round}`, leaderRedis);
  await leader.start();
  const standbys = [node(`fo-${kind}-${round}`), node(`fo-${kind}-${round}`)];
  await Promise.all(standbys.map((s) => s.start()));
  await sleep(Math.random() * RENEW); // end the leader at a random point of its renew cycle
  const elected = new Promise<number>((resolve) => {
    for (const s of standbys) s.once('elected', () => resolve(performance.now()));
  });
  const endedAt = performance.now();
  if (kind === 'crash') leaderRedis.disconnect();
  else await leader.stop();
  const at = await elected;
  await leader.stop();
  await Promise.all(standbys.map((s) => s.stop()));
  return at - endedAt;
}

const results: Record<string, unknown> = { ttlMs: TTL, renewIntervalMs: RENEW };
const lines: string[] = [];

for (const kind of ['graceful', 'crash'] as const) {
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) times.push(await failover(kind, i));
  const s = stats(times);
  results[`failover_${kind}_ms`] = { median: Math.round(s.median), max: Math.round(s.max) };
  lines.push(`failover ${kind}: median ${Math.round(s.median)} ms, max ${Math.round(s.max)} ms`);
  progress(lines[lines.length - 1]!);
}

// Steady state: one leader and two standbys, idle; count what the server executes.
{
  const admin = client();
  const nodes = [node('steady'), node('steady'), node('steady')];
  await Promise.all(nodes.map((n) => n.start()));
  await sleep(500);
  await admin.config('RESETSTAT');
  const window = 10;
  await sleep(window * 1000);
  const info = await admin.info('commandstats');
  await Promise.all(nodes.map((n) => n.stop()));
  const calls = (command: string) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
  // Round trips are the script calls our nodes send; Redis also counts the commands run inside them.
  const roundTrips = calls('evalsha') + calls('eval');
  const executed = [...info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)]
    .filter(([, name]) => name !== 'info' && name !== 'config|resetstat')
    .reduce((sum, [, , n]) => sum + Number(n), 0);
  const perNode = roundTrips / window / nodes.length;
  const executedPerNode = executed / window / nodes.length;
  results['redis_commands_per_second_per_node'] = Math.round(perNode * 100) / 100;
  results['redis_commands_executed_per_second_per_node'] = Math.round(executedPerNode * 100) / 100;
  lines.push(
    `redis commands per second per node (steady state, 1 leader + 2 standbys, renew every ${RENEW} ms): ${perNode.toFixed(2)} sent, ${executedPerNode.toFixed(2)} executed counting those inside scripts`,
  );
  progress(lines[lines.length - 1]!);
}

// A single job's lateness: how long after its due time (by the server's clock) each fire starts.
{
  const leader = node('single');
  const late: number[] = [];
  const scheduler = createScheduler({
    coordinator: leader,
    jobs: { single: { everyMs: 50, handler: (envelope: { scheduledAt: string }) => void late.push(Date.now() - Date.parse(envelope.scheduledAt)) } },
  });
  scheduler.start();
  await leader.start();
  await sleep(1000); // warm up
  late.length = 0;
  await sleep(seconds * 1000);
  await scheduler.stop();
  await leader.stop();
  const s = stats(late);
  results['single_job_lateness_ms'] = { fires: late.length, median: Math.round(s.median * 10) / 10, p99: Math.round(s.p99 * 10) / 10, max: s.max, early: late.filter((l) => l < 0).length };
  lines.push(
    `single job (every 50 ms), lateness by the server clock: median ${s.median.toFixed(1)} ms, p99 ${s.p99.toFixed(1)} ms, max ${s.max} ms over ${late.length} fires; ${late.filter((l) => l < 0).length} early`,
  );
  progress(lines[lines.length - 1]!);
}

// Dispatch capacity: N jobs each firing every second (all due in the same millisecond), in-process
// no-op handlers, at each concurrency asked for. The floor beside it: the same burst's envelopes made
// and handed to the handler in one synchronous loop, which is the least any scheduler that gives each
// fire its own envelope pays before the last handler runs (no timers, no records, no Redis).
function dispatchFloorMs(): number {
  let sink = 0;
  const handler = (envelope: Envelope) => {
    sink += envelope.fireId.length;
  };
  const at = Math.ceil(Date.now() / 1000) * 1000;
  const token = parseToken(7n);
  const pass = () => {
    const t0 = performance.now();
    for (let i = 0; i < jobCount; i++) handler(createEnvelope({ job: `job-${i}`, scheduledAt: at, token, issuer: 'node-a', payload: undefined }));
    return performance.now() - t0;
  };
  for (let i = 0; i < 3; i++) pass(); // warm up
  const ms = stats(Array.from({ length: 7 }, pass)).median;
  return sink > 0 ? ms : NaN; // reading sink keeps the handler's work from being optimized away
}
async function dispatchRun(concurrency: number): Promise<void> {
  const leader = node(`dispatch-${concurrency}`);
  let fired = 0;
  const lags: number[] = [];
  const jobs = Object.fromEntries(
    Array.from({ length: jobCount }, (_, i) => [
      `job-${i}`,
      {
        everyMs: 1000,
        handler: (envelope: { scheduledAt: string }) => {
          fired++;
          if (lags.length < 200_000) lags.push(Date.now() - Date.parse(envelope.scheduledAt));
        },
      },
    ]),
  );
  const scheduler = createScheduler({ coordinator: leader, jobs, concurrency });
  scheduler.start();
  await leader.start();
  await sleep(2000); // warm up
  fired = 0;
  lags.length = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const cpu = process.cpuUsage(cpu0);
  const elapsed = (performance.now() - t0) / 1000;
  const rate = fired / elapsed;
  const cpuShare = (cpu.user + cpu.system) / 1e6 / elapsed;
  const cpuPerFireUs = (cpu.user + cpu.system) / Math.max(1, fired);
  await scheduler.stop();
  await leader.stop();
  const lag = stats(lags);
  results[`dispatch_concurrency_${concurrency}`] = {
    jobs: jobCount,
    concurrency,
    demandedPerSecond: jobCount,
    firesPerSecond: Math.round(rate),
    leaderCpuShareOfOneCore: Math.round(cpuShare * 100) / 100,
    cpuPerFireUs: Math.round(cpuPerFireUs * 10) / 10,
    lagMs: { median: Math.round(lag.median), p99: Math.round(lag.p99), max: Math.round(lag.max) },
  };
  lines.push(
    `dispatch, concurrency ${concurrency}: ${jobCount} jobs every 1 s: ${Math.round(rate)} fires/s, leader CPU ${(cpuShare * 100).toFixed(0)}% of one core, ${cpuPerFireUs.toFixed(1)} us per fire`,
  );
  lines.push(
    `dispatch lag, concurrency ${concurrency} (server clock, scheduled to handler): median ${Math.round(lag.median)} ms, p99 ${Math.round(lag.p99)} ms, max ${Math.round(lag.max)} ms`,
  );
  progress(lines.slice(-2).join('\n'));
}

for (const concurrency of concurrencies) await dispatchRun(concurrency);
{
  const floorMs = dispatchFloorMs();
  results['dispatch_floor_ms'] = Math.round(floorMs * 10) / 10;
  lines.push(`dispatch floor: ${jobCount} envelopes made and handed to a no-op handler in one loop: ${floorMs.toFixed(1)} ms (median of 7)`);
  progress(lines.at(-1)!);
}

for (const c of clients) c.disconnect();
await server.stop();
if (args.json) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
else process.stdout.write(`coordinator benchmark (TTL ${TTL} ms, renew ${RENEW} ms, ${rounds} failovers of each kind)\n${lines.join('\n')}\n`);
