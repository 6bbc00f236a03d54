import { startEtcdCluster, type EtcdCluster } from '../etcd/etcd-cluster.js';
import { startMariadbServer } from '../mysql/mariadb-server.js';
import type { MachineNeed } from '../cli/machine-needs.js';

// What a simulation run does differently per lease store, one row each: the run and the machine
// look a store up here and name none, and the stores' names are the rows' (LeaseStoreName,
// LEASE_STORES). A new store the simulation runs on is a row (and the apps' `leaseStores`).

/**
 * The servers a run keeps to itself for its lease store (their faults must not reach another run),
 * and how its replicas reach them: each replica through fault proxies of its own (its link to the
 * lease store, which the partition faults cut).
 */
export interface StoreServers {
  /** The run's etcd cluster (its own faults: a member crashed, the leader lost). */
  readonly etcd?: EtcdCluster;
  /** The ports a replica reaches the store on: each gets a fault proxy per replica. */
  readonly ports: readonly number[];
  /** What the run's context (sim-app.ts `RunContext`) says of the store: the supervisor reaches it directly. */
  readonly run: { readonly mysqlUrl?: string };
  /**
   * What a replica's context (sim-app.ts `NodeContext`) says of the store, given the ports of its own
   * proxies (in `ports`' order). Written out here, not picked from those types: they name this table's
   * stores, so picking would make the two files import each other.
   */
  node(proxyPorts: readonly number[]): { readonly etcdEndpoints?: readonly string[]; readonly mysqlUrl?: string };
  stop(): Promise<void>;
}

export interface SimLeaseStore {
  readonly name: string;
  /** What a run's id (its schema, its key prefix) carries for a run on it: '' on the default store. */
  readonly idTag: string;
  /**
   * The shortest TTL the store keeps, in ms: a run asking for less asks for this (its renew interval
   * and fault time scaled alike), so the checker's bounds, counted in TTLs, describe the lease the
   * store actually keeps. 0: any.
   */
  readonly minTtlMs: number;
  /** What the machine needs beside the rest for a run on it. */
  readonly needs: readonly MachineNeed[];
  /** Starts the servers of the store a run keeps to itself. */
  startForRun(): Promise<StoreServers>;
}

/**
 * etcd grants whole seconds, and at least 1.5 times its election timeout (2 s with the defaults the
 * run's cluster keeps): a shorter TTL is raised by the server, and a crashed leader's lease lasts what
 * etcd granted.
 */
export const ETCD_MIN_TTL_MS = 2000;

/** No servers of its own: the store is the run's Redis or its PostgreSQL. */
const shared = async (): Promise<StoreServers> => ({ ports: [], run: {}, node: () => ({}), stop: async () => undefined });

const rows = [
  { name: 'redis', idTag: '', minTtlMs: 0, needs: [], startForRun: shared },
  { name: 'postgres', idTag: 'pg_', minTtlMs: 0, needs: [], startForRun: shared },
  {
    // A three-member cluster of the run's own.
    name: 'etcd',
    idTag: 'etcd_',
    minTtlMs: ETCD_MIN_TTL_MS,
    needs: ['etcd'],
    async startForRun() {
      const etcd = await startEtcdCluster();
      return {
        etcd,
        ports: etcd.members.map((m) => Number(new URL(m.clientUrl).port)),
        run: {},
        node: (proxyPorts) => ({ etcdEndpoints: proxyPorts.map((port) => `http://127.0.0.1:${port}`) }),
        stop: () => etcd.stop(),
      };
    },
  },
  {
    // A MariaDB server of the run's own: the leases and the scheduler's record live there.
    name: 'mysql',
    idTag: 'my_',
    minTtlMs: 0,
    needs: ['mariadb-server'],
    async startForRun() {
      const server = await startMariadbServer();
      const port = Number(new URL(server.url).port);
      const through = (p: number) => {
        const url = new URL(server.url);
        url.port = String(p);
        return url.toString();
      };
      return { ports: [port], run: { mysqlUrl: server.url }, node: ([proxy]) => ({ mysqlUrl: through(proxy!) }), stop: () => server.stop() };
    },
  },
] as const satisfies readonly SimLeaseStore[];

/** The lease stores the simulation runs on: the rows' names. */
export type LeaseStoreName = (typeof rows)[number]['name'];
export const LEASE_STORES: readonly LeaseStoreName[] = rows.map((r) => r.name);

/** The simulation's row of `name`. */
export function simLeaseStore(name: LeaseStoreName): SimLeaseStore {
  const row = (rows as readonly SimLeaseStore[]).find((r) => r.name === name);
  if (row === undefined) throw new Error(`the simulation knows no lease store ${name}`);
  return row;
}
