import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkRun, type CheckResult } from '../checker/check-run.js';
import { clockStepText, faketimeEnv } from '../faketime.js';
import { HARNESS_FAILED, History, type Effect } from '../history.js';
import { trackCleanup } from '../process/child-registry.js';
import { managedProcess, type ProcessLine } from '../process/managed-process.js';
import { startFaultProxy, type FaultProxy } from '../fault-proxy.js';
import { startPostgresServer } from '../postgres/postgres-server.js';
import { startPostgresCluster } from '../postgres/postgres-cluster.js';
import { simLeaseStore } from './lease-store-runs.js';
import { seededRandom } from '../random.js';
import { FaultContext, type SimNode } from './fault-context.js';
import { runFaultRounds } from './fault-rounds.js';
import { hasSettled } from './quiescence.js';
import { historyEventOf } from './replica-lines.js';
import type { Scenario } from './scenarios.js';
import { redisServerInstalled, startSimRedis } from './sim-redis.js';
import { startStarvationProbe } from './starvation-probe.js';
import { SUPERVISOR } from '../checker/starvation.js';
import type { LeaseStoreName, RedisEndpoint, RunContext, ServiceFault, SimApp, SimMode } from './sim-app.js';

export interface RunOptions {
  readonly databaseUrl: string;
  readonly replicas: number;
  /** How long faults are injected, ms. */
  readonly durationMs: number;
  readonly seed: number;
  readonly ttlMs: number;
  readonly renewIntervalMs: number;
  readonly everyMs: number;
  /** Where the replicas keep their lease. @defaultValue `'redis'` */
  readonly leaseStore?: LeaseStoreName;
  /** Called about once a second with what is going on. */
  readonly onProgress?: (status: RunStatus) => void;
}

export interface RunStatus {
  readonly scenario: string;
  readonly mode: SimMode;
  readonly elapsedMs: number;
  readonly durationMs: number;
  readonly phase: 'starting' | 'faults' | 'settling' | 'checking';
  readonly leader: string | undefined;
  readonly token: string | undefined;
}

export interface RunResult {
  /** The scenario's name, with `@postgres` when the lease lived in PostgreSQL. */
  readonly scenario: string;
  readonly leaseStore: LeaseStoreName;
  readonly mode: SimMode;
  readonly seed: number;
  readonly window: { readonly start: number; readonly end: number };
  readonly check: CheckResult;
  readonly history: History;
  readonly effects: readonly Effect[];
  readonly nodes: readonly string[];
  /** Replica stderr tails, for diagnosing a failed run. */
  readonly diagnostics: Readonly<Record<string, string>>;
  /** Each replica's log: every line it printed on stdout (stamped when read) and its stderr's last 64 KiB. */
  readonly logs: Readonly<Record<string, { readonly stdout: readonly ProcessLine[]; readonly stderr: string }>>;
  /**
   * The run's own Redis servers' logs (`redis-<port>`, `sentinel-<port>`: each one's last 256 KiB),
   * read as they stop, so filled in with the teardown, after the result is made.
   */
  readonly serverLogs: Readonly<Record<string, string>>;
  /**
   * Where the run's wall time went, ms per phase: `servers` (its own Redis, PostgreSQL, etcd or
   * MariaDB), `start` (the replicas started, to the first dispatch), `faults`, `settle` (healed, to
   * quiescence), `check` (replicas stopped, effects read and judged) and `teardown` (filled in as
   * the run's servers stop, after the result is made).
   */
  readonly phaseMs: Partial<Record<RunPhase, number>>;
}

export type RunPhase = 'servers' | 'start' | 'faults' | 'settle' | 'check' | 'teardown';

export { ETCD_MIN_TTL_MS } from './lease-store-runs.js';

/**
 * A run asks for the TTL its lease store keeps (etcd raises a shorter one: `SimLeaseStore.minTtlMs`),
 * its renew interval and the job's interval scaled alike, so that the checker's bounds, counted in
 * TTLs, describe the lease the store actually keeps, and the run is the same run slowed down: as many
 * fires per TTL, so an outage of so many TTLs leaves the same backlog, which the app's handler drains
 * at the same pace (on etcd at the unscaled interval, a 5 s outage left twice the fires, and a loaded
 * machine drained them no faster than new ones came due).
 */
function onStoreTimings(options: RunOptions): RunOptions {
  const minTtlMs = simLeaseStore(options.leaseStore ?? 'redis').minTtlMs;
  if (options.ttlMs >= minTtlMs) return options;
  const scale = minTtlMs / options.ttlMs;
  // The fault time too: a run is as many TTLs long as on the other stores, so as many rounds fit.
  return {
    ...options,
    ttlMs: minTtlMs,
    renewIntervalMs: Math.round(options.renewIntervalMs * scale),
    everyMs: Math.round(options.everyMs * scale),
    durationMs: Math.round(options.durationMs * scale),
  };
}

/** Parses a PostgreSQL URL's host and port, to put a fault proxy in front of it. */
function pgTarget(databaseUrl: string): { port: number; rewrite: (port: number) => string } {
  const url = new URL(databaseUrl);
  const host = url.hostname;
  if (host !== '127.0.0.1' && host !== 'localhost' && host !== '::1' && host !== '[::1]') {
    throw new Error(`the simulation only sends traffic to loopback; DATABASE_URL points at ${host}`);
  }
  return {
    port: Number(url.port || 5432),
    rewrite: (port) => {
      const copy = new URL(databaseUrl);
      copy.hostname = '127.0.0.1';
      copy.port = String(port);
      return copy.toString();
    },
  };
}

/**
 * One run of one scenario in one mode: starts its own Redis (a server, a failover pair, a Cluster or
 * a Sentinel deployment), a fault proxy per replica for PostgreSQL and (where the topology allows)
 * for Redis, the replicas as OS processes; injects the scenario's faults for `durationMs`; heals
 * everything and lets the replicas catch up; then checks what took effect against the promise.
 */
export async function runScenario(app: SimApp, scenario: Scenario, mode: SimMode, given: RunOptions): Promise<RunResult> {
  const options = onStoreTimings(given);
  const runFrom = Date.now();
  const store = simLeaseStore(options.leaseStore ?? 'redis');
  const leaseStore = options.leaseStore ?? 'redis';
  const label = scenarioLabel(scenario.name, leaseStore);
  const history = new History();
  const random = seededRandom(options.seed);
  const proxies: FaultProxy[] = [];
  const nodes: SimNode[] = [];
  /** Every line each replica printed, as read: kept with a failed run (formatted only then, by kept-runs). */
  const stdout = new Map<string, ProcessLine[]>();
  /**
   * What the run started besides its replicas and proxies (servers, the app's schema), each stopped
   * in the reverse order when the run ends, however it ends: a start that fails stops what started
   * before it.
   */
  const teardown: Array<{ readonly what: string; readonly stop: () => Promise<unknown> }> = [];
  /** Read from each server as the teardown stops it (its log goes with its folder). */
  const serverLogs: Record<string, string> = {};
  let started = Date.now();
  const phaseMs: Partial<Record<RunPhase, number>> = {};
  let phaseFrom = runFrom;
  /** Ends the phase under way: its time goes to `name`. */
  const phaseEnded = (name: RunPhase) => {
    const now = Date.now();
    phaseMs[name] = (phaseMs[name] ?? 0) + (now - phaseFrom);
    phaseFrom = now;
  };
  let phase: RunStatus['phase'] = 'starting';
  let ctx: FaultContext | undefined;
  /** The window checked: set once the first fire went out. */
  let windowStart: number | undefined;
  const progress = setInterval(() => {
    const leader = ctx?.leader();
    const token = leader === undefined ? undefined : [...history.events].reverse().find((e) => e.kind === 'belief' && e.node === leader.name && e.leader);
    options.onProgress?.({
      scenario: label,
      mode,
      elapsedMs: Date.now() - started,
      // What the run will take: a scenario's rounds that run at least once may outlast the time asked.
      durationMs: Math.max(options.durationMs, scenario.leastFaultMs ?? 0),
      phase,
      leader: leader?.name,
      token: token?.kind === 'belief' ? token.token : undefined,
    });
  }, 1000);

  // The supervisor's own starvation: it stamps every line it reads, so a supervisor kept off the CPU
  // makes replicas look late (see checker/starvation.ts).
  const stopProbe = startStarvationProbe(({ ms }) => history.record({ at: Date.now(), kind: 'starved', node: SUPERVISOR, ms }));
  let untrackCleanup = () => {};
  /** The run's result: its window, its check, what took effect, and each replica's last words. */
  const resultOf = (window: RunResult['window'], check: CheckResult, effects: readonly Effect[]): RunResult => ({
    scenario: label,
    leaseStore,
    mode,
    seed: options.seed,
    window,
    check,
    history,
    effects,
    nodes: nodes.map((n) => n.name),
    diagnostics: Object.fromEntries(nodes.map((n) => [n.name, n.process.stderr().slice(-2000)])),
    logs: Object.fromEntries(nodes.map((n) => [n.name, { stdout: stdout.get(n.name) ?? [], stderr: n.process.stderr() }])),
    serverLogs,
    phaseMs,
  });
  try {
    // A scenario that restarts PostgreSQL, or fails it over, gets a server (a primary and its replica)
    // of its own: the shared one serves everyone else.
    const postgres = scenario.postgres === 'private' ? await startPostgresServer() : undefined;
    if (postgres !== undefined) teardown.push({ what: 'PostgreSQL', stop: () => postgres.stop() });
    const cluster = scenario.postgres === 'replicated' ? await startPostgresCluster() : undefined;
    if (cluster !== undefined) teardown.push({ what: 'the PostgreSQL cluster', stop: () => cluster.stop() });
    const databaseUrl = postgres?.url ?? cluster?.url ?? options.databaseUrl;
    // The store's own servers for this run (etcd: a three-member cluster; MySQL: a MariaDB server; their
    // faults reach no other run).
    const servers = await store.startForRun();
    teardown.push({ what: `the ${leaseStore} lease store's servers`, stop: () => servers.stop() });
    const { etcd } = servers;
    const run: RunContext = {
      id: `sim_${scenario.name.replace(/-/g, '_')}_${store.idTag}${mode}_${randomBytes(3).toString('hex')}`,
      mode,
      databaseUrl,
      ttlMs: options.ttlMs,
      renewIntervalMs: options.renewIntervalMs,
      everyMs: options.everyMs,
      scenario: scenario.name,
      controlClock: scenario.controlClock ?? 'server',
      leaseStore,
      ...(cluster === undefined ? {} : { postgresMembers: cluster.memberUrls }),
      ...servers.run,
    };
    const pg = pgTarget(databaseUrl);
    // A Redis wherever one can start (the apps' controls keep their record there, out of the faults'
    // way); none where redis-server is missing and the app can do without on this lease store.
    const redis = (app.usesRedis?.(run.leaseStore) ?? true) || redisServerInstalled() ? await startSimRedis(scenario.redis) : undefined;
    if (redis !== undefined) {
      teardown.push({
        what: 'Redis',
        stop: () => {
          Object.assign(serverLogs, redis.logs());
          return redis.stop();
        },
      });
    }
    // A stepped clock reads its offset from a file the fault rewrites mid-run.
    const clockDir = scenario.clockFault?.kind === 'stepped' ? mkdtempSync(join(tmpdir(), 'fenced-clock-')) : undefined;
    if (clockDir !== undefined) teardown.push({ what: 'the clock file', stop: async () => rmSync(clockDir, { recursive: true, force: true }) });
    const clockFile = clockDir === undefined ? undefined : join(clockDir, 'faketime');
    if (clockFile !== undefined) writeFileSync(clockFile, clockStepText(0));
    started = Date.now();
    // Its schema and records, cleaned up even after a prepare that failed half-way, and on an interrupt.
    // A clean-up that fails is not the run's failure: after a failover its database may be gone.
    teardown.push({ what: "the app's clean-up", stop: () => app.cleanup(run).catch(() => undefined) });
    untrackCleanup = trackCleanup(() => app.cleanup(run));
    await app.prepare(run);
    phaseEnded('servers');
    for (let i = 1; i <= options.replicas; i++) {
      const name = `r${i}`;
      let redisProxy: FaultProxy | undefined;
      let endpoint: RedisEndpoint | undefined;
      if (redis === undefined) {
        endpoint = undefined;
      } else if (redis.kind === 'proxied') {
        redisProxy = await startFaultProxy(redis.topology.activePort);
        proxies.push(redisProxy);
        endpoint = { kind: 'server', url: `redis://127.0.0.1:${redisProxy.port}` };
      } else {
        endpoint = redis.endpoint;
      }
      const pgProxy = await startFaultProxy(pg.port);
      proxies.push(pgProxy);
      // This replica's link to a lease store of the run's own (in front of each etcd member's own client
      // proxy: the cluster's partition still reaches this replica).
      const storeProxies = await Promise.all(servers.ports.map((port) => startFaultProxy(port)));
      proxies.push(...storeProxies);
      const clockFault = i === 1 ? scenario.clockFault : undefined;
      const spec = app.replica(run, {
        name,
        redis: endpoint,
        databaseUrl: pg.rewrite(pgProxy.port),
        clockFault,
        ...servers.node(storeProxies.map((p) => p.port)),
      });
      const process = managedProcess(name, { ...spec, env: { ...spec.env, ...(clockFault ? faketimeEnv(clockFault, clockFile) : {}) } }, () => Date.now());
      const lines: ProcessLine[] = [];
      stdout.set(name, lines);
      process.onLine((line) => {
        lines.push(line);
        const event = historyEventOf(name, line);
        if (event !== undefined) history.record(event);
        ctx?.observe(name, line);
      });
      nodes.push({ name, process, redisProxy, pgProxy, storeProxies });
    }

    const startNode = (node: SimNode) => {
      node.process.start();
      history.record({ at: Date.now(), kind: 'process', node: node.name, event: 'started' });
    };
    // The exit of each incarnation (a kill, a crash), as it happens, so its leadership epoch ends there.
    for (const node of nodes) {
      node.process.onExit(({ crashed }) => history.record({ at: Date.now(), kind: 'process', node: node.name, event: 'exited', ...(crashed ? { crashed } : {}) }));
    }
    for (const node of nodes) startNode(node);

    const faultsEnd = () => Date.now() + options.durationMs;
    const faultService = app.faultService?.bind(app);
    const serviceHook = faultService === undefined ? undefined : (fault: ServiceFault | null) => faultService(run, fault);
    ctx = new FaultContext(nodes, redis, app.leaseKey?.(run), history, random, options.ttlMs, Number.POSITIVE_INFINITY, startNode, clockFile, postgres, cluster, etcd);
    // A run whose replicas cannot start is a row of the table saying why (a failure of liveness, or
    // inconclusive on a starved machine), never a throw that ends the whole simulation.
    const first = await ctx.waitForLeader(START_MS);
    // The checked window starts with the first dispatch: before the job ever ran, no fire was owed.
    const firstDispatch = first === undefined ? undefined : await ctx.waitForLine((_n, r) => r['kind'] === 'dispatch', START_MS);
    if (firstDispatch === undefined) {
      const why = first === undefined ? `no replica became leader within ${START_MS / 1000} s` : `no replica dispatched a fire within ${START_MS / 1000} s of the first election`;
      const stderr = nodes.map((n) => n.process.stderr().trim().split('\n').at(-1) ?? '').filter((tail) => tail !== '');
      phaseEnded('start');
      phase = 'checking';
      await Promise.all(nodes.map((n) => n.process.stop()));
      phaseEnded('check');
      const at = Date.now();
      const startFailure = `${why}${stderr.length > 0 ? ` (last stderr: ${stderr.join(' | ').slice(0, 300)})` : ''}`;
      return resultOf({ start: at, end: at }, checkRun({ history: history.events, effects: [], expectedFireIds: [], window: { start: started, end: at }, startFailure }), []);
    }
    windowStart = Date.now();
    phaseEnded('start');
    phase = 'faults';
    ctx = new FaultContext(nodes, redis, app.leaseKey?.(run), history, random, options.ttlMs, faultsEnd(), startNode, clockFile, postgres, cluster, etcd, serviceHook);
    await runFaultRounds(ctx, scenario.rounds);
    const windowEnd = Date.now();
    phaseEnded('faults');

    // Heal everything, then give the replicas time to elect, catch up and finish in-flight fires.
    phase = 'settling';
    for (const node of nodes) {
      node.redisProxy?.setMode({ kind: 'pass' });
      node.pgProxy.setMode({ kind: 'pass' });
      for (const proxy of node.storeProxies) proxy.setMode({ kind: 'pass' });
      if (node.process.paused) ctx.resume(node);
      if (!node.process.running) startNode(node);
    }
    // Until the run has settled (quiescence.ts), or for as long as that can take: a slow clock
    // stretches a deposed leader's belief fourfold, and catching up after a long outage takes a while.
    const afterWindow = new Set(app.expectedFireIds(run, windowEnd + 1, windowEnd + 60_000));
    const settleBy = Date.now() + options.ttlMs * 7 + 3500;
    const direct: RedisEndpoint | undefined = redis === undefined ? undefined : redis.kind === 'proxied' ? { kind: 'server', url: `redis://127.0.0.1:${redis.topology.activePort}` } : redis.endpoint;
    // Work the app holds that no replica has begun (a queue's waiting jobs): asked only once the
    // replicas look settled, and an app that cannot answer counts as having none.
    const noPendingWork = async () => ((await app.pendingWork?.(run, direct).catch(() => 0)) ?? 0) === 0;
    let settled = false;
    while (!(settled = hasSettled(history.events, afterWindow) && (await noPendingWork())) && Date.now() < settleBy) await new Promise((r) => setTimeout(r, 50));
    // Replies already on their way (a write's outcome line trails its commit by a few milliseconds).
    await new Promise((r) => setTimeout(r, options.everyMs));
    phaseEnded('settle');

    phase = 'checking';
    await Promise.all(nodes.map((n) => n.process.stop()));
    const effects = await app.effects(run);
    const fences = (await app.fenceStates?.(run, direct)) ?? [];
    const expected = app.expectedFireIds(run, windowStart + options.everyMs, windowEnd);
    const check = checkRun({
      history: history.events,
      effects,
      expectedFireIds: expected,
      window: { start: windowStart, end: windowEnd },
      recoveryMs: recoveryBoundMs(options, redis?.kind === 'replicated' ? redis.downAfterMs : 0),
      ...(scenario.failoverBound === undefined ? {} : { failoverBound: { ms: failoverBoundMs(options), fault: scenario.failoverBound } }),
      fences,
      settled,
    });
    phaseEnded('check');
    return resultOf({ start: windowStart, end: windowEnd }, check, effects);
  } catch (error) {
    // The toolkit failed outside the fault rounds (a server that did not start, a proxy, the effects
    // that could not be read): the run is a row of the table whose verdict names the error, kept with
    // its history and every replica's log, never a throw that ends the whole simulation. Safety is
    // still judged on what the history holds.
    harnessFailed(history, `while ${phase}: ${errorText(error)}`);
    const at = Date.now();
    return resultOf({ start: windowStart ?? at, end: at }, checkRun({ history: history.events, effects: [], expectedFireIds: [], window: { start: windowStart ?? started, end: at } }), []);
  } finally {
    stopProbe();
    clearInterval(progress);
    await Promise.all(nodes.map((n) => n.process.kill()));
    await Promise.all(proxies.map((p) => p.close()));
    for (const { what, stop } of teardown.reverse()) {
      // Each part stopped whatever another did; a part that would not stop fails the run (it may have
      // left a server behind), in its history, where the verdict reads it.
      await stop().catch((error: unknown) => harnessFailed(history, `stopping ${what}: ${errorText(error)}`));
    }
    untrackCleanup();
    phaseEnded('teardown');
  }
}

/** Records the toolkit's own failure in the run's history (see `HARNESS_FAILED`). */
function harnessFailed(history: History, detail: string): void {
  const at = Date.now();
  history.record({ at, kind: 'fault', fault: HARNESS_FAILED, phase: 'start', detail });
  history.record({ at, kind: 'fault', fault: HARNESS_FAILED, phase: 'end' });
}

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** How long a run waits for its first leader, and then for its first dispatch, ms. */
const START_MS = 30_000;

/** How a run is named in the table and the report: the scenario, and the lease store when not Redis. */
export function scenarioLabel(name: string, leaseStore: LeaseStoreName): string {
  return leaseStore === 'redis' ? name : `${name}@${leaseStore}`;
}

/**
 * How soon another replica must lead after the leader froze (inside its transaction, or anywhere):
 * its lease runs out (one TTL at most since its last renew), a standby's next attempt (one renew
 * interval at most), and a second for the election itself, the fence advance's grace period and
 * its ending of the frozen transaction included.
 */
export function failoverBoundMs(options: Pick<RunOptions, 'ttlMs' | 'renewIntervalMs'>): number {
  return options.ttlMs + options.renewIntervalMs + 1000;
}

/**
 * How soon after a fault the replicas must dispatch again, and dispatch what came due meanwhile: the
 * lease runs out (one TTL), a standby's next attempt (one more TTL at worst: it waits out what it was
 * told is left), one interval of the job, and slack for a loaded machine (the suite runs beside
 * CPU hogs) and Redis clients that reconnect. On Cluster and Sentinel (`downAfterMs` > 0) the
 * deployment itself must also settle after a fault: the deposed primary, awake, still answers until
 * it learns of its demotion, and clients find the new one; four of its down-after times. Measured
 * beside four CPU hogs, a fire came due 5.4 s before it went out after a Cluster fault ended.
 */
export function recoveryBoundMs(options: Pick<RunOptions, 'ttlMs' | 'everyMs'>, downAfterMs = 0): number {
  return 2 * options.ttlMs + options.everyMs + 2500 + 4 * downAfterMs;
}
