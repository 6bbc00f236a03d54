// Dispatch targets for the queues teams run on PostgreSQL: each turns graphile-worker's or pg-boss's
// enqueue call into the `add(name, data, { jobId })` the scheduler calls (BullMQ's own shape). Typed
// structurally, so the coordinator depends on neither library.
import { createHash } from 'node:crypto';
import type { QueueLike } from './scheduler.js';

/** The part of graphile-worker's `WorkerUtils` (or a task's `helpers`) the target calls. */
export interface GraphileWorkerAddJob {
  addJob(identifier: string, payload: unknown, spec: { jobKey: string; jobKeyMode: 'unsafe_dedupe'; maxAttempts?: number }): Promise<unknown>;
}

/**
 * Fires enqueued into graphile-worker: `queue: graphileWorkerQueue(workerUtils)` on a job. The task
 * identifier is the job's name unless `taskIdentifier` says otherwise; the job key is the fire's
 * dispatch key, added with `jobKeyMode: 'unsafe_dedupe'`, so while a copy of that dispatch is queued
 * or running a second one is dropped (not replaced, and not run beside a locked one).
 */
export function graphileWorkerQueue(utils: GraphileWorkerAddJob, options: { taskIdentifier?: string; maxAttempts?: number } = {}): QueueLike {
  if (typeof utils?.addJob !== 'function') throw new TypeError('graphileWorkerQueue: pass graphile-worker WorkerUtils (makeWorkerUtils) or helpers');
  return {
    add: (name, data, { jobId }) =>
      utils.addJob(options.taskIdentifier ?? name, data, {
        jobKey: jobId,
        jobKeyMode: 'unsafe_dedupe',
        ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }),
      }),
  };
}

/** The part of a `PgBoss` instance the target calls. */
export interface PgBossSend {
  send(name: string, data: object, options: { id: string } & Record<string, unknown>): Promise<string | null>;
}

/**
 * Fires sent to pg-boss: `queue: pgBossQueue(boss)` on a job. The pg-boss queue is the job's name
 * unless `queue` says otherwise (create it first: `boss.createQueue(name)`); `sendOptions` go to every
 * `send` (`retryLimit`, `expireInSeconds`, …). The job id is a UUID derived from the fire's dispatch
 * key, and pg-boss inserts a job whose id exists as nothing at all, so a second dispatch is dropped
 * for as long as pg-boss keeps the first (its retention).
 */
export function pgBossQueue(boss: PgBossSend, options: { queue?: string; sendOptions?: Record<string, unknown> } = {}): QueueLike {
  if (typeof boss?.send !== 'function') throw new TypeError('pgBossQueue: pass a PgBoss instance');
  return {
    add: (name, data, { jobId }) => boss.send(options.queue ?? name, data as object, { ...options.sendOptions, id: uuidFromKey(jobId) }),
  };
}

/** A UUID (version 8: custom) from the first 128 bits of SHA-256 of `key`: the same key, the same id. */
export function uuidFromKey(key: string): string {
  const bytes = createHash('sha256').update(`fenced-dispatch-v1\n${key}`).digest().subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
