/**
 * The scheduler that calls an HTTP service (caller.ts, service.ts) as a @fenced/chaos app. The
 * service is one process per run, started with the run's schema and stopped with it; the simulation
 * faults the callers (the replicas), whose job is an HTTP call.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { type RedisEndpoint, type RunContext, type SimApp } from '@fenced/chaos';
import { bundledEntry } from '../bundled-entry.js';
import { dropSchema, expectedFireIds, guardFenceStates, prepareSchema, readEffects } from '../sim-support.js';
import { JOB, RESOURCE } from './names.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
/** The replica and the service, each bundled once (bundled-entry.ts: the same sources, started in half the CPU time). */
const caller = bundledEntry(fileURLToPath(new URL('./caller.ts', import.meta.url)));
const serviceEntry = bundledEntry(fileURLToPath(new URL('./service.ts', import.meta.url)));
const ENTRIES_SQL = readFileSync(fileURLToPath(new URL('./entries.sql', import.meta.url)), 'utf8');

/** The service of each run: its process, its URL, the key its callers sign with, and its acks of faults. */
const services = new Map<string, { process: ChildProcess; url: string; key: string; faultAcks: Array<(fault: string | null) => void> }>();

/** This service runs on one Redis server. */
function serverUrl(endpoint: RedisEndpoint | undefined): string {
  if (endpoint === undefined) throw new Error('the HTTP service\'s callers run on a single Redis server: the run has none');
  if (endpoint.kind !== 'server') throw new Error(`the HTTP service's callers run on a single Redis server, not ${endpoint.kind}`);
  return endpoint.url;
}

/** Starts the run's service and resolves once it listens. */
async function startService(run: RunContext): Promise<void> {
  const key = randomBytes(32).toString('base64url');
  await serviceEntry.ready();
  const child = spawn(process.execPath, serviceEntry.args(), {
    cwd: root,
    env: { ...process.env, MODE: run.mode, DATABASE_URL: run.databaseUrl, SIM_SCHEMA: run.id, SIGNING_KEY: key },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const faultAcks: Array<(fault: string | null) => void> = [];
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the ledger service did not listen within 30 s')), 30_000);
    child.once('exit', (code) => reject(new Error(`the ledger service exited (${code}) before it listened`)));
    createInterface({ input: child.stdout! }).on('line', (text) => {
      const record = JSON.parse(text) as { kind?: string; port?: number; fault?: string | null };
      if (record.kind === 'fault') faultAcks.shift()?.(record.fault ?? null);
      if (record.kind === 'listening') {
        clearTimeout(timer);
        resolve(Number(record.port));
      }
    });
  });
  services.set(run.id, { process: child, url: `http://127.0.0.1:${port}/entries`, key, faultAcks });
}

async function stopService(run: RunContext): Promise<void> {
  const service = services.get(run.id);
  if (service === undefined) return;
  services.delete(run.id);
  if (service.process.exitCode !== null) return;
  const exited = new Promise((resolve) => service.process.once('exit', resolve));
  service.process.kill('SIGTERM');
  const timer = setTimeout(() => service.process.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

export const httpServiceApp: SimApp = {
  name: 'http-service',
  // The faults of the callers, on a single Redis server: the service and its database stay up (the
  // database faults are the ledger app's), and the callers' lease is not set up on Cluster or Sentinel.
  // Not partition: the simulation cuts a replica off through its fault proxies to Redis and
  // PostgreSQL, and a caller's link to the service has none, so a partitioned caller's request still
  // lands at once, before any new term posts: nothing late to refuse (seed 7: its guarded run was
  // toothless, "no stale refused"), and a scenario that cannot bite proves nothing.
  // And service-down: the service itself answers 503, or loses its answers, while the callers lead.
  scenarios: ['pause', 'stall', 'crash', 'clock-skew', 'clock-step', 'service-down'],

  async faultService(run, fault) {
    const service = services.get(run.id);
    if (service === undefined) throw new Error(`no ledger service for run ${run.id}`);
    const acked = new Promise<string | null>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the ledger service did not take the fault within 10 s')), 10_000);
      service.faultAcks.push((taken) => {
        clearTimeout(timer);
        resolve(taken);
      });
    });
    service.process.stdin!.write(`${JSON.stringify({ fault })}\n`);
    const taken = await acked;
    if (taken !== fault) throw new Error(`the ledger service took fault ${String(taken)}, not ${String(fault)}`);
  },

  async prepare(run) {
    await caller.ready();
    await prepareSchema(run, ENTRIES_SQL, RESOURCE);
    await startService(run);
  },

  replica(run, node) {
    const service = services.get(run.id);
    if (service === undefined) throw new Error(`no ledger service for run ${run.id}: prepare() starts it`);
    return {
      command: process.execPath,
      args: caller.args(),
      cwd: root,
      env: {
        NODE_NAME: node.name,
        MODE: run.mode,
        REDIS_URL: serverUrl(node.redis),
        KEY_PREFIX: run.id,
        TTL_MS: String(run.ttlMs),
        RENEW_MS: String(run.renewIntervalMs),
        EVERY_MS: String(run.everyMs),
        SERVICE_URL: service.url,
        SIGNING_KEY: service.key,
        CONTROL_CLOCK: run.controlClock,
      },
    };
  },

  effects: (run) =>
    readEffects(run, {
      text: `SELECT $1::text AS resource, fire_id, token::text AS token, caller AS node, commit_seq::text AS commit_seq,
                    extract(epoch FROM scheduled_at) * 1000 AS scheduled_at, extract(epoch FROM committed_at) * 1000 AS committed_at
               FROM "${run.id}".entries WHERE commit_seq IS NOT NULL`,
      values: [RESOURCE],
    }),

  expectedFireIds: (run, from, to) => expectedFireIds(JOB, run.everyMs, from, to),

  fenceStates: (run, endpoint) => guardFenceStates(run, new Redis(serverUrl(endpoint), { maxRetriesPerRequest: 1, connectTimeout: 500 }), RESOURCE),

  async cleanup(run) {
    await stopService(run);
    await dropSchema(run);
  },
};
