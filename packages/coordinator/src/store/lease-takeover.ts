import { z } from 'zod';

/**
 * How a SQL lease store's election waits for, then ends, what an expired term still holds open (the
 * guard's lease-checked writes, the scheduler's records): `graceMs` at a time, ending those sessions
 * after each wait, `timeoutMs` in all. One shape for every store that offers it.
 */
export interface LeaseTakeover {
  readonly graceMs: number;
  readonly timeoutMs: number;
}

/** The option's schema and default, shared by the stores' option schemas. */
export const leaseTakeoverSchema = z
  .object({ graceMs: z.number().int().min(1).max(60_000), timeoutMs: z.number().int().min(0).max(600_000) })
  .default({ graceMs: 250, timeoutMs: 10_000 });
