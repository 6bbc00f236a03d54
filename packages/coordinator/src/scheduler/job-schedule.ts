import { Cron } from 'croner';

/** When a job fires: the first fire time strictly after a given time (epoch ms). */
export interface JobSchedule {
  nextAfter(epochMs: number): number | null;
}

/** Cron expressions (seconds optional) in a time zone, parsed by croner. Throws on a bad pattern. */
export function cronSchedule(pattern: string, timezone = 'UTC'): JobSchedule {
  const cron = new Cron(pattern, { timezone, paused: true });
  return {
    nextAfter(epochMs) {
      return cron.nextRun(new Date(epochMs))?.getTime() ?? null;
    },
  };
}

/**
 * A fixed interval aligned on the epoch: every replica computes the same fire times from the same
 * clock, whatever moment it started at, so fire ids agree across leaders.
 */
export function intervalSchedule(everyMs: number): JobSchedule {
  return {
    nextAfter(epochMs) {
      return (Math.floor(epochMs / everyMs) + 1) * everyMs;
    },
  };
}
