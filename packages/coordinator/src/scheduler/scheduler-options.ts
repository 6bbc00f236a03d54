import { z } from 'zod';
import { isFunction, isObject, meterProviderSchema } from '@fenced/shared/internal';

/** A job name: part of every fire id and of Redis hash fields. */
export const jobNameSchema = z.string().regex(/^[A-Za-z0-9_.-]{1,100}$/, 'must be 1-100 characters from A-Z a-z 0-9 _ . -');

/** One scheduled job: when (cron or fixed interval) and where its fires go (handler or queue). */
export const jobSchema = z
  .strictObject({
    /** Cron expression (5 fields, or 6 with seconds first), evaluated in `timezone`. */
    cron: z.string().min(1).max(200).optional(),
    /** IANA time zone of the cron expression. @defaultValue `'UTC'` */
    timezone: z.string().min(1).max(100).optional(),
    /** Fixed interval, aligned on the epoch so every replica computes the same fire times. */
    everyMs: z.number().int().min(10).max(366 * 86_400_000).optional(),
    /** In-process handler: receives the envelope. */
    handler: z.custom<(...args: never[]) => unknown>(isFunction, { message: 'must be a function' }).optional(),
    /** A BullMQ-style queue (`add(name, data, { jobId })`); the job id is the fire's `dispatchKey`. */
    queue: z.custom<object>((v) => isObject(v) && isFunction((v as { add?: unknown }).add), { message: 'must have add(name, data, opts)' }).optional(),
    /** Payload of every fire, or a function of the fire's scheduled time. */
    payload: z.unknown().optional(),
  })
  .superRefine((job, ctx) => {
    if ((job.cron === undefined) === (job.everyMs === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['cron'], message: 'give exactly one of cron or everyMs' });
    }
    if (job.timezone !== undefined && job.cron === undefined) {
      ctx.addIssue({ code: 'custom', path: ['timezone'], message: 'only applies to cron jobs' });
    }
    if (job.timezone !== undefined) {
      try {
        new Intl.DateTimeFormat('en-US', { timeZone: job.timezone });
      } catch {
        ctx.addIssue({ code: 'custom', path: ['timezone'], message: `unknown time zone ${JSON.stringify(job.timezone)}` });
      }
    }
    if ((job.handler === undefined) === (job.queue === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['handler'], message: 'give exactly one of handler or queue' });
    }
  });

/** Options of `createScheduler`, with their defaults. */
export const schedulerOptionsSchema = z
  .object({
    /** The coordinator whose leadership gates dispatch. */
    coordinator: z.custom<object>(isObject, { message: 'must be a Coordinator' }),
    /** The jobs, by name. */
    jobs: z.record(jobNameSchema, jobSchema).refine((jobs) => Object.keys(jobs).length > 0, 'at least one job'),
    /**
     * What a new leader does with fires that came due while nobody led: `all` dispatches every missed
     * fire (oldest first, up to `maxCatchUpFires` per job), `once` one fire for the lot (the latest),
     * `skip` none. The default is `all`: with the guard's dedupe, dispatching a fire twice is harmless,
     * while a lost billing run is not.
     * @defaultValue `'all'`
     */
    misfire: z.enum(['all', 'once', 'skip']).default('all'),
    /**
     * Missed fires older than this are not caught up (they are reported as skipped).
     * @defaultValue `3600000` (one hour)
     */
    catchUpWindowMs: z.number().int().min(0).default(3_600_000),
    /**
     * The most missed fires of one job dispatched on catch-up; older ones are reported as skipped.
     * @defaultValue `100`
     */
    maxCatchUpFires: z.number().int().min(1).max(100_000).default(100),
    /**
     * How soon the leader looks again at a job whose fires were left waiting (its fires ran past the
     * dispatch slots, or a newer term planned them while its last drain ran). Due fires need no
     * polling: the leader wakes at each fire's due time.
     * @defaultValue `25`
     */
    tickMs: z.number().int().min(1).max(60_000).default(25),
    /**
     * How many fires may be in dispatch at once (fires of one job always go one after another).
     * @defaultValue `256`
     */
    concurrency: z.number().int().min(1).max(100_000).default(256),
    /**
     * How a fire whose dispatch failed (its handler threw, its queue refused it) is dispatched again:
     * after a backoff that doubles from `minDelayMs` up to `maxDelayMs`, each delay drawn at random
     * between half of it and all of it (so that jobs failing together do not retry together). A fire is
     * retried while its term lasts and it is inside `catchUpWindowMs`; the job's later fires wait
     * behind it, in order. The cap is short on purpose: once the store is back, every later fire of
     * the job waits out the failed one's last backoff (in the simulation, a 2 s cap made fires late
     * past the recovery bound after `postgres-down`; at 1 s a recovering store still sees each job
     * at most once a second).
     * @defaultValue `{ minDelayMs: 100, maxDelayMs: 1000 }`
     */
    retry: z
      .strictObject({
        minDelayMs: z.number().int().min(1).max(60_000).default(100),
        maxDelayMs: z.number().int().min(1).max(3_600_000).default(1000),
      })
      .refine((retry) => retry.minDelayMs <= retry.maxDelayMs, { message: 'minDelayMs must not be above maxDelayMs', path: ['minDelayMs'] })
      .default({ minDelayMs: 100, maxDelayMs: 1000 }),
    /** Receives structured events. */
    logger: z.custom<(event: never) => void>(isFunction, { message: 'must be a function' }).optional(),
    meterProvider: meterProviderSchema.optional(),
    /** Turns each envelope into what is dispatched (for example: signs it). */
    seal: z.custom<(envelope: never) => unknown>(isFunction, { message: 'must be a function' }).optional(),
    /** Where to resume jobs whose record Redis lost (see `CreateSchedulerOptions`). */
    recoverLastFired: z.custom<(jobs: never) => unknown>(isFunction, { message: 'must be a function' }).optional(),
  });

export type SchedulerOptionsInput = z.input<typeof schedulerOptionsSchema>;
export type SchedulerOptions = z.output<typeof schedulerOptionsSchema>;
export type JobOptionsInput = z.input<typeof jobSchema>;
