/** What one doctor check concluded. */
export type Verdict = 'pass' | 'warn' | 'fail' | 'skip';

export interface CheckResult {
  /** Stable id for scripts: `redis.eviction`, `postgres.migrations`, … */
  readonly id: string;
  readonly verdict: Verdict;
  /** What was found, in one or two sentences. */
  readonly detail: string;
  /** What to do about it (absent on a pass). */
  readonly fix?: string;
}

export const pass = (id: string, detail: string): CheckResult => ({ id, verdict: 'pass', detail });
export const warn = (id: string, detail: string, fix: string): CheckResult => ({ id, verdict: 'warn', detail, fix });
export const fail = (id: string, detail: string, fix: string): CheckResult => ({ id, verdict: 'fail', detail, fix });
export const skip = (id: string, detail: string): CheckResult => ({ id, verdict: 'skip', detail });
