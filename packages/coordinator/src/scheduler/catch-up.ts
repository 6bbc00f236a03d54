import type { JobSchedule } from './job-schedule.js';

export type MisfirePolicy = 'all' | 'once' | 'skip';

export interface CatchUpPlan {
  /** Scheduled times to dispatch now, oldest first. */
  readonly fires: number[];
  /** Missed fires inside the window not dispatched (over the limit, or by policy). */
  readonly skipped: number;
  /** True when fires older than the window were missed too (not counted: that could take long). */
  readonly beforeWindow: boolean;
  /** The first fire time after everything this plan covers. */
  readonly next: number | null;
}

/**
 * What a new leader owes one job. `last` is the scheduled time of the last recorded dispatch (null
 * for a job never dispatched: nothing before `now` is owed then). Fires in (last, now] are missed;
 * those older than `now - windowMs` are never caught up, and at most `max` of the rest are.
 */
export function planCatchUp(
  schedule: JobSchedule,
  last: number | null,
  now: number,
  policy: MisfirePolicy,
  windowMs: number,
  max: number,
): CatchUpPlan {
  if (last === null) return { fires: [], skipped: 0, beforeWindow: false, next: schedule.nextAfter(now) };
  const missed: number[] = [];
  let skipped = 0;
  const windowStart = now - windowMs;
  // Start at the window: a job that fires every second and a leader gone for a month must not cost
  // millions of iterations.
  const from = Math.max(last, windowStart - 1);
  const first = schedule.nextAfter(last);
  // windowStart <= now, so a first fire before the window is due.
  const beforeWindow = first !== null && first < windowStart;
  let at = schedule.nextAfter(from);
  while (at !== null && at <= now) {
    if (at >= windowStart) missed.push(at);
    // Keep memory bounded when a job fires every second and the leader was gone for hours.
    if (missed.length > max) {
      missed.shift();
      skipped++;
    }
    at = schedule.nextAfter(at);
  }
  if (policy === 'skip') return { fires: [], skipped: skipped + missed.length, beforeWindow, next: at };
  if (policy === 'once' && missed.length > 1) {
    return { fires: [missed[missed.length - 1]!], skipped: skipped + missed.length - 1, beforeWindow, next: at };
  }
  return { fires: missed, skipped, beforeWindow, next: at };
}
