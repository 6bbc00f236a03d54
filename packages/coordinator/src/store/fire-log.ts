/**
 * The scheduler's record of what it dispatched, per job: where a new term resumes. What the
 * scheduler needs from the store that keeps it, beside the lease, in the store's folder (for one:
 * store/redis/redis-fire-log.ts). Every record is checked against the lease in the store itself:
 * a deposed leader cannot even advance the scheduler's state.
 */
export interface FireLog {
  /**
   * Every job's last recorded fire (epoch ms, as text), and the store's marks: fields that start with
   * a colon, which no job name has (`:initialized`, `:dispatched:<job>`, `:failover-gap`; see
   * scheduler.ts).
   */
  load(): Promise<Record<string, string>>;
  /**
   * Records one fire (or a baseline) under `leaseValue`, only while that lease is still ours.
   * @returns 1 when recorded, 0 when the lease is not ours.
   */
  record(leaseValue: string, record: FireRecord, failoverGapMs?: number | null): Promise<number>;
}

/** One fire to record: a dispatched fire, or a job's baseline (no `dispatchedAt`). */
export interface FireRecord {
  readonly job: string;
  /** The fire's scheduled time, epoch ms. */
  readonly scheduledAt: number;
  /** When it was dispatched by the server clock, epoch ms; absent for a baseline. */
  readonly dispatchedAt?: number | null;
}
