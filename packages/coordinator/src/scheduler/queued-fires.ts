import { fireId, type Fence } from '@fenced/shared';
import type { JobSchedule } from './job-schedule.js';

/**
 * The fire log's mark per queued job, `:queued-from:<job>`: the scheduled time (epoch ms) from which
 * the job's queued fires are not known to have taken effect. Kept like a job's record (only ever
 * raised, and only under the lease), so it needs nothing of the store beyond a field.
 *
 * Why a mark: a queued fire is recorded once it is enqueued, and a worker may get to it only after
 * the next election, when its token is stale and the guard refuses it. The new term must dispatch it
 * again, and to find it, must know where to start looking: neither the last fire recorded (a later
 * fire may have been applied before an earlier one) nor the last fire applied (none may have been)
 * tells.
 */
export const QUEUED_FROM_PREFIX = ':queued-from:';

/**
 * Every scheduled time of `schedule` in [from, through], oldest first: the fires earlier terms queued
 * that no fence confirmed yet. Bounded by the catch-up window (`windowStart`): as for a fire nobody
 * dispatched, nothing older than the window is dispatched again.
 */
export function queuedSince(schedule: JobSchedule, from: number, through: number, windowStart: number): number[] {
  const fires: number[] = [];
  let at = schedule.nextAfter(Math.max(from, windowStart) - 1);
  while (at !== null && at <= through) {
    fires.push(at);
    at = schedule.nextAfter(at);
  }
  return fires;
}

/**
 * The fires among `candidates` (per job, scheduled times) that no fence says took effect, per job,
 * oldest first. Every fence that can tell (`Fence.appliedFireIds`) is asked once for all jobs; a
 * claim on any of them counts (a job writes to the resource of its guard). A fence that fails to
 * answer tells nothing (`onError` hears why), so with no answer at all every candidate is owed: a
 * fire dispatched again is refused as a duplicate by the guard, a fire not dispatched is lost.
 */
export async function unappliedQueuedFires(
  candidates: ReadonlyMap<string, readonly number[]>,
  fences: readonly Fence[],
  onError: (error: unknown) => void,
): Promise<Map<string, number[]>> {
  const ids: string[] = [];
  for (const [job, times] of candidates) for (const at of times) ids.push(fireId(job, at));
  const applied = new Set<string>();
  if (ids.length > 0) {
    const sources = fences.filter((fence) => typeof fence.appliedFireIds === 'function');
    await Promise.all(
      sources.map((fence) =>
        fence.appliedFireIds!(ids).then((answer) => {
          for (const id of answer) applied.add(id);
        }, onError),
      ),
    );
  }
  const owed = new Map<string, number[]>();
  for (const [job, times] of candidates) owed.set(job, times.filter((at) => !applied.has(fireId(job, at))));
  return owed;
}
