import type { Fence } from '@fenced/shared';

/** What a new term knows about one job when it plans the job's catch-up. */
export interface ResumeFacts {
  /** The scheduled time of the job's last recorded dispatch in Redis, or null when there is none. */
  readonly recorded: number | null;
  /** True when Redis lost the record altogether (the fires hash has no initialized mark). */
  readonly recordLost: boolean;
  /** The scheduled time of the job's last fire that took effect, from the durable record, if known. */
  readonly recovered: number | undefined;
  /** True when the election found Redis behind a fence (Redis lost data). */
  readonly regressed: boolean;
  /**
   * For a job whose fires go to a queue: its last fire that took effect, from the durable record, if
   * known. A queued fire waits for a worker after its dispatch was recorded; once this term's
   * election advanced the fences, a copy still waiting (or in a worker) carries a stale token and is
   * refused. So the term dispatches again every fire after the last one applied.
   */
  readonly queuedApplied?: number | undefined;
  /** The server's time now, epoch ms. */
  readonly now: number;
  readonly catchUpWindowMs: number;
}

/**
 * Where a job resumes (`last`: fires after it are owed; null: nothing before now is owed) and the
 * baseline to record for a job Redis holds no record of.
 *
 * No record means the job never ran, or that Redis lost its data. The durable record says which
 * when it knows (nothing there on a first deployment); without it, an election that found Redis
 * behind a fence catches up the whole window (downstream dedupe drops what was already applied)
 * rather than lose the fires of the outage. A job without a record gets one at once: without it, a
 * leader that dies before its first dispatch would leave its successor no trace of the fires that
 * came due in between.
 */
export function resumePoint(facts: ResumeFacts): { last: number | null; baseline: number | null } {
  let last = facts.recorded;
  if (last !== null && facts.queuedApplied !== undefined && facts.queuedApplied < last) last = facts.queuedApplied;
  if (last === null && facts.recordLost) last = facts.recovered ?? null;
  if (last === null && facts.regressed) last = facts.now - facts.catchUpWindowMs;
  return { last, baseline: facts.recorded === null ? (last ?? facts.now) : null };
}

/**
 * Per job, the latest fire that took effect: from the user's hook, else from every fence that keeps
 * applied fires (the latest fire of a job on any resource: it was dispatched), all jobs at once. A
 * source that fails tells nothing (`onError` hears why); answers from the future are ignored.
 */
export async function recoverLastFires(input: {
  readonly jobs: readonly string[];
  readonly now: number;
  readonly catchUpWindowMs: number;
  readonly hook: ((jobs: readonly string[]) => Promise<ReadonlyMap<string, number>>) | undefined;
  readonly fences: readonly Fence[];
  readonly onError: (error: unknown) => void;
}): Promise<Map<string, number>> {
  const { jobs, now } = input;
  const latest = new Map<string, number>();
  const take = (answer: ReadonlyMap<string, number>) => {
    for (const job of jobs) {
      const at = answer.get(job);
      if (typeof at === 'number' && Number.isFinite(at) && at <= now && at > (latest.get(job) ?? -Infinity)) latest.set(job, at);
    }
  };
  if (input.hook !== undefined) {
    await input.hook(jobs).then(take, input.onError);
    return latest;
  }
  // Fires applied before the catch-up window need no answer (the plan starts at the window), so the
  // look-back is the window and as much again for clocks that disagree, at least a minute.
  const since = new Date(now - input.catchUpWindowMs - Math.max(input.catchUpWindowMs, 60_000));
  const sources = input.fences.filter((fence) => typeof fence.lastAppliedFires === 'function');
  await Promise.all(sources.map((fence) => fence.lastAppliedFires!(since).then(take, input.onError)));
  return latest;
}
