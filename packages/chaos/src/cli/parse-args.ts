import { parseArgs } from 'node:util';
import { leaseStoresOf, SCENARIO_NAMES, scenarios as scenarioTable, type ScenarioName } from '../sim/scenarios.js';
import { LEASE_STORES, type LeaseStoreName } from '../sim/sim-app.js';

/** One scenario on one lease store. */
export interface SimTarget {
  readonly scenario: ScenarioName;
  readonly leaseStore: LeaseStoreName;
}

export interface SimArgs {
  readonly scenarios: readonly ScenarioName[];
  /** Every scenario on every lease store it runs on, in order. */
  readonly targets: readonly SimTarget[];
  readonly durationMs: number;
  readonly replicas: number;
  readonly seed: number;
  /** How many runs go at once (each with its own servers, schema and replicas). */
  readonly parallel: number;
  /** Where to write the HTML report; undefined: a new temporary folder (the path is printed either way). */
  readonly report: string | undefined;
  readonly json: boolean;
  readonly help: boolean;
}

/** A command-line mistake: printed as one line, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The shortest fault time that lets every scenario show the protection it tests. */
export const MIN_DURATION_MS = 6000;

/** `15s`, `10m`, `1500ms`, `1h`, or a bare number of seconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (match === null) throw new UsageError(`bad duration ${JSON.stringify(text)}: use for example 15s, 10m or 1500ms`);
  const value = Number(match[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(match[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
  // Below this, the scenarios whose rounds need a few TTLs of room run none and fail as toothless
  // (measured: pause at 3 s, 2 of 2); every scenario shows its protection at 6 s, as the suite runs it.
  if (value < MIN_DURATION_MS) throw new UsageError(`duration ${text} is too short: at least ${MIN_DURATION_MS / 1000}s, so that every scenario's faults have room to show its protection`);
  if (value > 24 * 3_600_000) throw new UsageError(`duration ${text} is too long: at most 24h`);
  return Math.round(value);
}

export const USAGE = `usage: pnpm sim [--scenario ${[...SCENARIO_NAMES, 'all'].join('|')}[,…]] [--duration 15s] [--replicas 3] [--lease-store ${[...LEASE_STORES, 'default', 'all'].join('|')}] [--seed N] [--parallel N] [--report FILE.html] [--json]`;

/**
 * `appScenarios`: the scenarios the app can run (see `SimApp.scenarios`); `stores`: the lease stores
 * it can run on (`SimApp.leaseStores`). `all` means the app's scenarios that run on one of its stores
 * (`postgres-failover` runs on the PostgreSQL store only, so not for an app on Redis alone).
 */
export function parseSimArgs(argv: readonly string[], randomSeed: () => number, appScenarios: readonly ScenarioName[] = SCENARIO_NAMES, stores: readonly LeaseStoreName[] = ['redis']): SimArgs {
  const supported = appScenarios.filter((s) => leaseStoresOf(scenarioTable[s]).possible.some((store) => stores.includes(store)));
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        scenario: { type: 'string', default: 'all' },
        'lease-store': { type: 'string', default: 'default' },
        duration: { type: 'string', default: '15s' },
        replicas: { type: 'string', default: '3' },
        seed: { type: 'string' },
        parallel: { type: 'string', default: '1' },
        report: { type: 'string' },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    // node's parseArgs explains some mistakes over several lines; a usage error is one line.
    const first = (err as Error).message.split('\n')[0]!.replace(/\.$/, '');
    throw new UsageError(`${first} (a value that starts with a dash is not one here); ${USAGE}`);
  }
  const names = values.scenario.split(',').map((s) => s.trim());
  const scenarios: ScenarioName[] = [];
  for (const name of names) {
    if (name === 'all') scenarios.push(...supported);
    else if ((supported as readonly string[]).includes(name)) scenarios.push(name as ScenarioName);
    else if ((SCENARIO_NAMES as readonly string[]).includes(name)) throw new UsageError(`this app does not run the ${name} scenario: choose from ${[...supported, 'all'].join(', ')}`);
    else throw new UsageError(`unknown scenario ${JSON.stringify(name)}: choose from ${[...supported, 'all'].join(', ')}`);
  }
  const storeChoice = values['lease-store'];
  if (![...LEASE_STORES, 'default', 'all'].includes(storeChoice)) throw new UsageError(`--lease-store must be ${[...LEASE_STORES, 'default'].join(', ')} or all, not ${JSON.stringify(storeChoice)}`);
  if ((LEASE_STORES as readonly string[]).includes(storeChoice) && !(stores as readonly string[]).includes(storeChoice)) {
    throw new UsageError(`this app does not run on the ${storeChoice} lease store: choose from ${stores.join(', ')}`);
  }
  const targets: SimTarget[] = [];
  for (const scenario of [...new Set(scenarios)]) {
    const of = leaseStoresOf(scenarioTable[scenario]);
    const wanted = storeChoice === 'default' ? of.default : storeChoice === 'all' ? of.possible : of.possible.filter((s) => s === storeChoice);
    for (const leaseStore of wanted) if (stores.includes(leaseStore)) targets.push({ scenario, leaseStore });
  }
  if (targets.length === 0) throw new UsageError(`none of the scenarios chosen runs on the ${storeChoice} lease store`);
  const replicas = Number(values.replicas);
  if (!Number.isInteger(replicas) || replicas < 2 || replicas > 9) throw new UsageError(`--replicas must be a whole number from 2 to 9, not ${values.replicas}`);
  const parallel = Number(values.parallel);
  if (!Number.isInteger(parallel) || parallel < 1 || parallel > 8) throw new UsageError(`--parallel must be a whole number from 1 to 8, not ${values.parallel}`);
  let seed = randomSeed();
  if (values.seed !== undefined) {
    seed = Number(values.seed);
    if (!Number.isInteger(seed) || seed < 0 || seed > 2 ** 32 - 1) throw new UsageError(`--seed must be a whole number from 0 to 4294967295, not ${values.seed}`);
  }
  return {
    scenarios: [...new Set(scenarios)],
    targets,
    durationMs: parseDuration(values.duration),
    replicas,
    seed,
    parallel,
    report: values.report,
    json: values.json,
    help: values.help,
  };
}
