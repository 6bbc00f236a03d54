/**
 * `pnpm mutate --module <path> [--tests a,b] [--lines 60-134]`: mutation testing of one module with
 * mutants nobody picked by hand; `--lines` keeps a TypeScript module's mutants to those lines (a
 * module whose tests take a minute a mutant, as the etcd lease store's, is run a part at a time).
 * Not part of `pnpm test`: each mutant runs tests (half a minute to a minute each for a store's suite
 * on two cores; a second or so for a pure module's).
 *
 * - A TypeScript module goes to StrykerJS (stryker.config.mjs): its mutators over the tests that
 *   cover it (below, or `--tests`; for a module not listed, the unit project's tests that import it),
 *   each mutant against the tests that covered its line.
 * - A SQL or Lua file, which Stryker does not reach, gets the operator mutants of
 *   operator-mutants.ts (comparisons, clocks, row locks, GREATEST/LEAST, a `+ 1`): one scratch copy
 *   of the repository, each mutant written into it in turn, the generated modules rebuilt, and the
 *   tests that cover the file run there (the store's conformance suite and its own tests, below, or
 *   `--tests`). A mutant is killed when a test fails on it.
 *
 * Either way it prints each survivor (to be killed by a new test or argued equivalent in
 * docs/planted-bugs.md) and ends with one line: `mutate: <file>: N mutants, K killed, S survived
 * (P % killed) in T s`. Exits 1 on a survivor.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { firstFailure, root, scratchCopy } from '../scratch-copy.js';
import { operatorMutants } from './operator-mutants.js';
import { strykerOn } from './stryker.js';

/** The tests that cover each store's SQL and Lua, by folder. */
const COVERING: ReadonlyArray<readonly [RegExp, readonly string[]]> = [
  [/^packages\/coordinator\/src\/store\/redis\/lua\//, ['test/lease-store/conformance-redis.test.ts', 'packages/coordinator/src/lease/coordinator.redis.test.ts', 'packages/coordinator/src/store/redis/record-fires.redis.test.ts']],
  [/^packages\/(consumer-guard\/src\/redis|shared\/src)\/lua\//, ['packages/consumer-guard/src/redis/redis-guard.redis.test.ts', 'test/mysql/mysql-guard.test.ts']],
  // The Redis lease store's TypeScript (its Lua is the entry above): the conformance suite on single
  // Redis, the coordinator's own Redis tests, and Sentinel (where every grant and renew is confirmed).
  [/^packages\/coordinator\/src\/store\/redis\//, ['test/lease-store/conformance-redis.test.ts', 'packages/coordinator/src/lease/coordinator.redis.test.ts', 'packages/coordinator/src/store/redis/record-fires.redis.test.ts', 'test/redis/redis-sentinel.test.ts', 'test/lease-store/redis-lease-store.test.ts', 'packages/coordinator/src/store/redis/not-on-primary.test.ts']],
  [/^packages\/coordinator\/src\/store\/etcd\//, ['test/lease-store/conformance-etcd.test.ts', 'packages/coordinator/src/store/etcd/etcd-sessions.etcd.test.ts', 'test/etcd/etcd-leases.test.ts', 'test/etcd/etcd-faults.test.ts', 'test/etcd/etcd-cluster-exit.test.ts', 'test/etcd/etcd-security.test.ts', 'test/etcd/etcd-lease-store.test.ts']],
  [/^packages\/coordinator\/src\/store\/postgres\//, ['test/lease-store/conformance-postgres.test.ts', 'packages/coordinator/src/store/postgres/postgres-leases.pg.test.ts', 'packages/coordinator/src/store/postgres/release-notifications.pg.test.ts', 'test/lease-checked/conformance-postgres.test.ts', 'test/lease-store/postgres-lease-store.test.ts', 'test/postgres/postgres-failover.test.ts']],
  [/^packages\/consumer-guard\/src\/postgres\//, ['test/fence-store/conformance-postgres.test.ts', 'packages/consumer-guard/src/postgres/postgres-guard.pg.test.ts', 'packages/consumer-guard/src/postgres/takeover.pg.test.ts', 'packages/consumer-guard/src/postgres/concurrency.pg.test.ts', 'test/lease-checked/conformance-postgres.test.ts', 'test/fence-store/postgres-store.test.ts', 'packages/consumer-guard/src/postgres/connection-loss.pg.test.ts', 'test/queues/transactional-batch.test.ts']],
  [/^packages\/coordinator\/src\/store\/mysql\//, ['test/lease-store/conformance-mysql.test.ts', 'test/lease-store/mysql-lease-procedures.test.ts', 'test/lease-store/mysql-grant-takeover.test.ts', 'test/lease-store/mysql-lease-store.test.ts', 'test/lease-checked/conformance-mysql.test.ts']],
  [/^packages\/consumer-guard\/src\/mysql\//, ['test/fence-store/conformance-mysql.test.ts', 'test/fence-store/mysql-store.test.ts', 'test/fence-store/mysql-takeover.test.ts', 'test/mysql/mysql-guard.test.ts', 'test/lease-checked/conformance-mysql.test.ts', 'test/lease-store/mysql-lease-procedures.test.ts']],
  // The in-memory stores (TypeScript, for StrykerJS): their conformance suites, the deterministic
  // simulation that runs on them, and the tests that run a coordinator or a guard on them, all through
  // the package's memory entry point (which vitest's related files do not follow).
  [/^packages\/coordinator\/src\/store\/memory\//, ['packages/coordinator/src/store/memory/memory-server.test.ts', 'packages/coordinator/src/store/memory/memory-backend.test.ts', 'test/lease-store/conformance-memory.test.ts', 'test/dst/dst.test.ts', 'test/coordinator/record-refused.test.ts', 'test/coordinator/superseded-term.test.ts']],
  [/^packages\/consumer-guard\/src\/memory\//, ['test/fence-store/conformance-memory.test.ts', 'test/dst/dst.test.ts', 'packages/consumer-guard/src/takeover/advance-with-takeover.test.ts', 'packages/consumer-guard/src/handler/wrap-handler.test.ts', 'test/coordinator/record-refused.test.ts', 'test/coordinator/superseded-term.test.ts']],
  // The takeover and the handler wrapper (TypeScript, for StrykerJS): tests reach them through the
  // package's index, which vitest's related files do not follow.
  [/^packages\/consumer-guard\/src\/takeover\//, ['packages/consumer-guard/src/takeover/advance-with-takeover.test.ts', 'test/fence-store/conformance-memory.test.ts', 'test/fence-store/conformance-postgres.test.ts', 'packages/consumer-guard/src/postgres/takeover.pg.test.ts', 'test/coordinator/frozen-leader.test.ts']],
  [/^packages\/consumer-guard\/src\/handler\//, ['packages/consumer-guard/src/handler/wrap-handler.test.ts', 'packages/consumer-guard/src/handler/wrap-handler.pg.test.ts', 'test/metrics/metrics.test.ts', 'test/http/http-fences.test.ts', 'test/mysql/mysql-guard.test.ts', 'test/queues/bullmq-processor.test.ts', 'test/queues/graphile-worker.test.ts', 'test/repo/failpoints.test.ts', 'test/coordinator/record-refused.test.ts']],
];

/**
 * Options for every PostgreSQL session of a mutant's tests (node-postgres reads PGOPTIONS): a mutant
 * can turn a function's retry loop into one that never ends, and the server would run it on after its
 * test gave up, its client gone, burning a core under every later mutant. A statement that runs 30 s
 * is a hang (no test's statement runs near that long: its test fails, so the mutant is killed, as
 * Stryker counts a timeout), and the server checks every second that the client of a running
 * statement is still there. (The MariaDB of a run is its own, stopped with the run.)
 */
const BOUNDED_STATEMENTS = [process.env['PGOPTIONS'], '-c statement_timeout=30000', '-c client_connection_check_interval=1000'].filter(Boolean).join(' ');

const { values } = parseArgs({ options: { module: { type: 'string' }, tests: { type: 'string' }, lines: { type: 'string' } } });
const file = values.module?.replace(/^\.\//, '');
if (file === undefined || !/\.(sql|lua|ts)$/.test(file) || file.endsWith('.test.ts')) {
  process.stderr.write('mutate: --module names one .ts, .sql or .lua file of the repository (for example packages/coordinator/src/scheduler/catch-up.ts)\n');
  process.exit(2);
}
const tests = values.tests?.split(',') ?? COVERING.find(([folder]) => folder.test(file))?.[1];
// A TypeScript module with no tests named runs against every unit test that imports it.
if (values.lines !== undefined && !(file.endsWith('.ts') && /^\d+-\d+$/.test(values.lines))) {
  process.stderr.write('mutate: --lines is a range of lines, as 60-134, of a TypeScript module\n');
  process.exit(2);
}
if (file.endsWith('.ts')) process.exit(strykerOn(file, tests ?? [], values.lines));
if (tests === undefined) {
  process.stderr.write(`mutate: no tests are known to cover ${file}: name them with --tests a,b\n`);
  process.exit(2);
}

const original = readFileSync(join(root, file), 'utf8');
const mutants = operatorMutants(original, file.endsWith('.lua') ? 'lua' : 'sql', file.includes('/mysql/') ? 'mysql' : 'postgres');
const started = performance.now();
const scratch = scratchCopy('fenced-mutate-');
const survivors: string[] = [];
let killed = 0;
try {
  process.stderr.write(`mutate: ${file}: ${mutants.length} mutants, each against ${tests.join(', ')}\n`);
  for (const [i, mutant] of mutants.entries()) {
    writeFileSync(join(scratch, file), mutant.text);
    const gen = spawnSync(process.execPath, ['scripts/gen-assets.mjs'], { cwd: scratch, encoding: 'utf8' });
    const report = join(scratch, 'mutate-report.json');
    rmSync(report, { force: true });
    if (gen.status === 0) {
      await runTests(scratch, ['run', '--project', 'unit', '--reporter=json', `--outputFile=${report}`, ...tests]);
    }
    const verdict = gen.status !== 0 ? 'killed (the generated modules refuse it)' : verdictOf(report, scratch);
    if (verdict.startsWith('killed')) killed++;
    else survivors.push(`line ${mutant.line}: ${mutant.change}`);
    process.stderr.write(`[${i + 1}/${mutants.length}] line ${mutant.line}: ${mutant.change}: ${verdict}\n`);
  }
} finally {
  writeFileSync(join(scratch, file), original);
  rmSync(scratch, { recursive: true, force: true });
}

/**
 * Runs vitest in the scratch copy in a process group of its own, for ten minutes at most. A run past
 * that (a mutant that hangs the run) is ended with everything it started: the servers of the unit
 * project's global setup (a private MariaDB, an etcd cluster) are its children, and a vitest killed
 * alone leaves them running under every later mutant.
 */
async function runTests(scratch: string, args: readonly string[]): Promise<void> {
  const child = spawn(join(scratch, 'node_modules', '.bin', 'vitest'), args, { cwd: scratch, env: { ...process.env, CI: 'true', PGOPTIONS: BOUNDED_STATEMENTS }, stdio: 'ignore', detached: true });
  const exited = once(child, 'exit');
  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // The group is gone already.
    }
  };
  let timer: NodeJS.Timeout | undefined;
  const ranOut = new Promise<'ran out'>((resolve) => (timer = setTimeout(() => resolve('ran out'), 10 * 60_000)));
  if ((await Promise.race([exited, ranOut])) === 'ran out') {
    signalGroup('SIGTERM');
    const grace = setTimeout(() => signalGroup('SIGKILL'), 10_000);
    await exited;
    clearTimeout(grace);
  }
  clearTimeout(timer);
  // Whatever of the group outlived vitest (a server its teardown never reached) goes with it.
  signalGroup('SIGKILL');
}

/**
 * Killed when a test failed (or a file failed to load), or when vitest wrote no report (the mutant
 * crashed the run or ran past its time: a hang is detected, as Stryker counts a timeout); survived
 * when every test passed.
 */
function verdictOf(report: string, scratch: string): string {
  const result = firstFailure(report, scratch);
  if (result.kind === 'failed') return `killed by ${result.by}`;
  return result.kind === 'no report' ? 'killed (vitest wrote no report: the run crashed or timed out)' : 'SURVIVED';
}

for (const survivor of survivors) process.stdout.write(`survived: ${file} ${survivor}\n`);
const percent = mutants.length === 0 ? 100 : Math.round((killed / mutants.length) * 100);
process.stdout.write(`mutate: ${file}: ${mutants.length} mutants, ${killed} killed, ${survivors.length} survived (${percent} % killed) in ${Math.round((performance.now() - started) / 1000)} s\n`);
process.exit(survivors.length === 0 ? 0 : 1);
