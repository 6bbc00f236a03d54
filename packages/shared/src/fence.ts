import type { Token } from './token.js';

/**
 * A fence on one resource: the highest token committed there. Implemented by the guards
 * (`@fenced/consumer-guard`) and used by the coordinator, which advances every fence it knows to a
 * freshly minted token before its leader dispatches anything.
 */
export interface Fence {
  /** The resource this fence protects. */
  readonly resource: string;
  /** The highest committed token, or `null` when nothing was ever committed. */
  highest(): Promise<Token | null>;
  /**
   * Raises the fence to `token` without a write. Strict: rejects with `FenceAheadError` when the
   * fence already holds `token` or a higher one, because two elections must never share a token.
   * Waits for in-flight writes with lower tokens to finish; once it resolves, none can commit.
   */
  advance(token: Token): Promise<void>;
  /**
   * Optional: per job, the scheduled time (epoch ms) of the latest fire that took effect on this
   * resource, among the fires applied since `since`, all jobs in one query. A scheduler whose Redis
   * lost its record of dispatched fires resumes from here instead of dispatching its whole catch-up
   * window again. Fires whose id is not a scheduler fire id (see `fireId`) are left out.
   */
  lastAppliedFires?(since: Date): Promise<ReadonlyMap<string, number>>;
  /**
   * Optional: which of `fireIds` took effect on this resource (their claims are in its table of
   * applied fires). A scheduler whose fires go to a queue asks at each new term which of the fires
   * earlier terms queued were applied, and dispatches the others again: a queued copy carries its
   * term's token and is refused once the fence moved on. Answers from this method only, in any
   * order; a pruned claim reads as not applied.
   */
  appliedFireIds?(fireIds: readonly string[]): Promise<ReadonlySet<string>>;
}
