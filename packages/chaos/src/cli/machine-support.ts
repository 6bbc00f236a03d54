import { etcdBinary } from '../etcd/etcd-cluster.js';
import { mariadbBinary } from '../mysql/mariadb-server.js';
import { findLibfaketime } from '../faketime.js';
import { postgresBinDir } from '../postgres/postgres-server.js';
import { scenarioLabel } from '../sim/run-scenario.js';
import { scenarios } from '../sim/scenarios.js';
import { redisServerInstalled } from '../sim/sim-redis.js';
import type { SimApp } from '../sim/sim-app.js';
import type { SimTarget } from './parse-args.js';
import { simLeaseStore } from '../sim/lease-store-runs.js';
import { MACHINE_NEEDS, type MachineNeed } from './machine-needs.js';

export { MACHINE_NEEDS, type MachineNeed } from './machine-needs.js';


/** What `target` needs of the machine: a Redis of its own, server binaries, the lease store's, libfaketime. */
export function needsOf(app: SimApp, target: SimTarget): MachineNeed[] {
  const scenario = scenarios[target.scenario];
  const needs: MachineNeed[] = [];
  if (app.usesRedis?.(target.leaseStore) ?? true) needs.push('redis-server');
  if (scenario.postgres !== undefined) needs.push('PostgreSQL server binaries');
  needs.push(...simLeaseStore(target.leaseStore).needs);
  if (scenario.clockFault !== undefined) needs.push('libfaketime');
  return needs;
}

/** Which of the needs this machine meets, each looked up once. */
export function machineHas(): (need: MachineNeed) => boolean {
  const found = (lookup: () => unknown) => {
    try {
      return lookup() !== undefined;
    } catch {
      return false;
    }
  };
  const has: Record<MachineNeed, boolean> = {
    'redis-server': redisServerInstalled(),
    'PostgreSQL server binaries': found(postgresBinDir),
    etcd: found(etcdBinary),
    'mariadb-server': found(mariadbBinary),
    libfaketime: findLibfaketime() !== undefined,
  };
  return (need) => has[need];
}

/**
 * The targets this machine can run, and, when some cannot, one line saying which were left out and
 * what to install for them.
 */
export function runnableHere(app: SimApp, targets: readonly SimTarget[], has: (need: MachineNeed) => boolean): { runnable: SimTarget[]; leftOut: string | undefined } {
  const runnable: SimTarget[] = [];
  const left: string[] = [];
  const missing = new Set<MachineNeed>();
  for (const target of targets) {
    const lacking = needsOf(app, target).filter((need) => !has(need));
    if (lacking.length === 0) runnable.push(target);
    else {
      left.push(scenarioLabel(target.scenario, target.leaseStore));
      for (const need of lacking) missing.add(need);
    }
  }
  if (left.length === 0) return { runnable, leftOut: undefined };
  const named = left.length <= 6 ? left.join(', ') : `${left.slice(0, 6).join(', ')} and ${left.length - 6} more`;
  const why = [...missing].map((need) => `no ${need}: ${MACHINE_NEEDS[need]}`).join('; ');
  return { runnable, leftOut: `left out ${left.length} of ${targets.length} (${named}), which this machine cannot run (${why})` };
}
