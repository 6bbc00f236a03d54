/**
 * The BullMQ service (service.ts) as a @fenced/chaos app: how the simulation starts a replica, what
 * took effect, what is still waiting in the queue. The steps to do the same for your own service are
 * in README.md beside this file.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { SCENARIO_NAMES, type RedisEndpoint, type SimApp } from '@fenced/chaos';
import { bundledEntry } from '../bundled-entry.js';
import { dropSchema, expectedFireIds, guardFenceStates, prepareSchema, readEffects } from '../sim-support.js';
import { JOB, QUEUE, RESOURCE } from './names.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
/** The replica, bundled once (bundled-entry.ts: the same sources, started in half the CPU time). */
const service = bundledEntry(fileURLToPath(new URL('./service.ts', import.meta.url)));
const SETTLEMENTS_SQL = readFileSync(fileURLToPath(new URL('./settlements.sql', import.meta.url)), 'utf8');

/** Where the faults that aim at a write land: between the worker's pre-check and its write. */
const WORK_MS = 120;

/** This service runs on one Redis server (BullMQ on Cluster needs a hash-tagged prefix; not set up here). */
function serverUrl(endpoint: RedisEndpoint | undefined): string {
  if (endpoint === undefined) throw new Error('the BullMQ service runs on a single Redis server: the run has none');
  if (endpoint.kind !== 'server') throw new Error(`the BullMQ service runs on a single Redis server, not ${endpoint.kind}`);
  return endpoint.url;
}

export const bullmqServiceApp: SimApp = {
  name: 'bullmq-service',
  // Every scenario on a single Redis server; the queue is not set up for Cluster or Sentinel. The
  // faults inside the guarded transaction (freeze-in-commit, connection-killed) and the PostgreSQL
  // restart are run on the ledger app; this service's worker has not been set up for them yet.
  // Nor is redis-lag: here the queue keeps the lagging leader's dispatch, so its control shows damage
  // only when a fire's two dispatches land on either side of the handover (measured on seed 7: 2
  // anomalies in one run, none in the next), and a scenario whose control may not bite proves nothing.
  scenarios: SCENARIO_NAMES.filter((name) => !['cluster-failover', 'sentinel-failover', 'freeze-in-commit', 'connection-killed', 'postgres-restart', 'redis-lag'].includes(name)),

  prepare: async (run) => {
    await service.ready();
    await prepareSchema(run, SETTLEMENTS_SQL, RESOURCE);
  },

  replica(run, node) {
    return {
      command: process.execPath,
      args: service.args(),
      cwd: root,
      env: {
        NODE_NAME: node.name,
        MODE: run.mode,
        REDIS_URL: serverUrl(node.redis),
        DATABASE_URL: node.databaseUrl,
        SIM_SCHEMA: run.id,
        KEY_PREFIX: run.id,
        TTL_MS: String(run.ttlMs),
        RENEW_MS: String(run.renewIntervalMs),
        EVERY_MS: String(run.everyMs),
        WORK_MS: String(WORK_MS),
        CONTROL_CLOCK: run.controlClock,
      },
    };
  },

  effects: (run) =>
    readEffects(run, {
      text: `SELECT $1::text AS resource, fire_id, token::text AS token, worker AS node, commit_seq::text AS commit_seq,
                    extract(epoch FROM scheduled_at) * 1000 AS scheduled_at, extract(epoch FROM committed_at) * 1000 AS committed_at
               FROM "${run.id}".settlements WHERE commit_seq IS NOT NULL`,
      values: [RESOURCE],
    }),

  expectedFireIds: (run, from, to) => expectedFireIds(JOB, run.everyMs, from, to),

  async pendingWork(run, endpoint) {
    const connection = new Redis(serverUrl(endpoint), { maxRetriesPerRequest: 1, connectTimeout: 500 });
    connection.on('error', () => {});
    const queue = new Queue(QUEUE, { connection, prefix: run.id });
    try {
      const counts = await queue.getJobCounts('wait', 'active', 'delayed', 'prioritized');
      return Object.values(counts).reduce((a, b) => a + b, 0);
    } finally {
      await queue.close();
      connection.disconnect();
    }
  },

  fenceStates: (run, endpoint) => guardFenceStates(run, new Redis(serverUrl(endpoint), { maxRetriesPerRequest: 1, connectTimeout: 500 }), RESOURCE),

  cleanup: dropSchema,
};
