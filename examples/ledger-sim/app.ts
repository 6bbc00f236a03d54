/**
 * The ledger simulation as a @fenced/chaos app: how to start a replica, and how to read what took
 * effect. This file is the glue between the toolkit (which imports no SDK package) and the SDK.
 */
import { fileURLToPath } from 'node:url';
import type { SimApp } from '@fenced/chaos';
import { leaseKeys } from '@fenced/coordinator';
import { bundledEntry } from '../bundled-entry.js';
import { dropSchema, expectedFireIds, guardFenceStates, prepareSchema, readEffects } from '../sim-support.js';
import { JOB, LEASE, LEDGER_SQL, RESOURCE } from './ledger.js';
import { connectRedis } from './redis-endpoint.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** The replica, bundled once (bundled-entry.ts: the same sources, started in half the CPU time). */
const replicaEntry = bundledEntry(fileURLToPath(new URL('./replica.ts', import.meta.url)));

/** Time between dispatch and write (where mid-write faults land), and between commit and record. */
const WORK_MS = 120;
const POST_COMMIT_MS = 40;

export const ledgerApp: SimApp = {
  name: 'ledger',
  leaseStores: ['redis', 'postgres', 'etcd', 'mysql'],
  // replica.ts takes `hold-pool` (the pool-exhausted scenario).
  replicasHoldPool: true,

  prepare: async (run) => {
    await replicaEntry.ready();
    await prepareSchema(run, LEDGER_SQL, RESOURCE);
  },

  replica(run, node) {
    return {
      command: process.execPath,
      args: replicaEntry.args(),
      cwd: root,
      env: {
        NODE_NAME: node.name,
        MODE: run.mode,
        ...(node.redis === undefined ? {} : { REDIS_ENDPOINT: JSON.stringify(node.redis) }),
        DATABASE_URL: node.databaseUrl,
        SIM_SCHEMA: run.id,
        KEY_PREFIX: run.id,
        TTL_MS: String(run.ttlMs),
        RENEW_MS: String(run.renewIntervalMs),
        EVERY_MS: String(run.everyMs),
        WORK_MS: String(WORK_MS),
        POST_COMMIT_MS: String(POST_COMMIT_MS),
        CONTROL_CLOCK: run.controlClock,
        LEASE_STORE: run.leaseStore,
        ...(run.postgresMembers === undefined ? {} : { POSTGRES_MEMBERS: JSON.stringify(run.postgresMembers) }),
        ...(node.etcdEndpoints === undefined ? {} : { ETCD_ENDPOINTS: node.etcdEndpoints.join(',') }),
        ...(node.mysqlUrl === undefined ? {} : { MYSQL_URL: node.mysqlUrl }),
      },
    };
  },

  effects: (run) =>
    readEffects(run, {
      text: `SELECT resource, fire_id, token::text AS token, node, commit_seq::text AS commit_seq,
                    extract(epoch FROM scheduled_at) * 1000 AS scheduled_at, extract(epoch FROM committed_at) * 1000 AS committed_at
               FROM "${run.id}".ledger WHERE commit_seq IS NOT NULL`,
    }),

  expectedFireIds: (run, from, to) => expectedFireIds(JOB, run.everyMs, from, to),

  fenceStates: (run, endpoint) => guardFenceStates(run, endpoint === undefined ? undefined : connectRedis(endpoint), RESOURCE),

  // Redis is needed for the leases and the guard's fast path on the Redis store only: elsewhere the
  // guard checks the lease in PostgreSQL, and on a machine without Redis the control keeps its record
  // there too.
  usesRedis: (leaseStore) => leaseStore === 'redis',

  leaseKey(run) {
    return leaseKeys(run.id, LEASE).counter;
  },

  cleanup: dropSchema,
};
