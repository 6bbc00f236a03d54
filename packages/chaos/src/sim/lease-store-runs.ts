import { startEtcdCluster, type EtcdCluster } from '../etcd/etcd-cluster.js';
import type { LeaseStoreName } from './sim-app.js';

// What a simulation run does differently per lease store, one row each: the run and the machine
// look a store up here and name none. A new store the simulation runs on is a row (and the apps'
// `leaseStores`).

export interface SimLeaseStore {
  readonly name: LeaseStoreName;
  /** What a run's id (its schema, its key prefix) carries for a run on it: '' on the default store. */
  readonly idTag: string;
  /**
   * The shortest TTL the store keeps, in ms: a run asking for less asks for this (its renew interval
   * and fault time scaled alike), so the checker's bounds, counted in TTLs, describe the lease the
   * store actually keeps. 0: any.
   */
  readonly minTtlMs: number;
  /** What the machine needs beside the rest for a run on it. */
  readonly needsEtcd: boolean;
  /** Starts the servers of the store a run keeps to itself (its faults must not reach another run). */
  startForRun(): Promise<{ readonly etcd?: EtcdCluster }>;
}

/**
 * etcd grants whole seconds, and at least 1.5 times its election timeout (2 s with the defaults the
 * run's cluster keeps): a shorter TTL is raised by the server, and a crashed leader's lease lasts what
 * etcd granted.
 */
export const ETCD_MIN_TTL_MS = 2000;

const rows: readonly SimLeaseStore[] = [
  { name: 'redis', idTag: '', minTtlMs: 0, needsEtcd: false, startForRun: async () => ({}) },
  { name: 'postgres', idTag: 'pg_', minTtlMs: 0, needsEtcd: false, startForRun: async () => ({}) },
  // A three-member cluster of the run's own.
  { name: 'etcd', idTag: 'etcd_', minTtlMs: ETCD_MIN_TTL_MS, needsEtcd: true, startForRun: async () => ({ etcd: await startEtcdCluster() }) },
];

/** The simulation's row of `name`. */
export function simLeaseStore(name: LeaseStoreName): SimLeaseStore {
  const row = rows.find((r) => r.name === name);
  if (row === undefined) throw new Error(`the simulation knows no lease store ${name}`);
  return row;
}
