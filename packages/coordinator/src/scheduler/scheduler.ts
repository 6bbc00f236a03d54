import { EventEmitter } from 'node:events';
import { failpoints } from '@fenced/shared/failpoints';
import {
  ConfigError,
  createEnvelope,
  dispatchKey,
  fireId,
  outcomeOfError,
  outcomeOfResult,
  type DispatchOutcome,
  type Envelope,
  type FencedEvent,
  type FencedLogger,
} from '@fenced/shared';
import { emit, parseOptions } from '@fenced/shared/internal';
import { schedulerOptionsSchema, type JobOptionsInput, type SchedulerOptionsInput } from './scheduler-options.js';
import type { FireLog } from '../store/fire-log.js';
import type { LeaderTerm } from '../lease/coordinator-types.js';
import type { Leadership } from './leadership.js';
import { planCatchUp, type MisfirePolicy } from './catch-up.js';
import { recoverLastFires, resumePoint } from './resume.js';
import { QUEUED_FROM_PREFIX, queuedSince, unappliedQueuedFires } from './queued-fires.js';
import { DueQueue } from './due-queue.js';
import { cronSchedule, intervalSchedule, type JobSchedule } from './job-schedule.js';
import { SchedulerMetrics } from '../metrics/scheduler-metrics.js';
import { retryDelayMs, type RetryPolicy } from './retry-delay.js';
import type { MeterProvider } from '@opentelemetry/api';

/** What an in-process handler is given besides the envelope. */
export interface FireContext {
  /**
   * Aborts when this term ends (the lease lost, handed over or stopped): pass it to what the handler
   * waits on (`sendFire(url, { envelope, signal })`, a query's cancellation) so that a deposed
   * leader's handler stops early. The fence refuses its writes either way.
   */
  readonly signal: AbortSignal;
  /**
   * How long one call of this fire should wait for an answer: the lease's TTL. A call that waits
   * longer holds up the job's later fires (they wait behind it, in order) for longer than a whole
   * term may last; given up at this bound, the fire is dispatched again after a backoff, and the
   * fence and dedupe make the second call safe. `sendFire(url, { envelope, ...context })` passes
   * both this and `signal`.
   */
  readonly timeoutMs: number;
}

/**
 * An in-process fire handler. The scheduler owns the fire's delivery and reads what the handler did
 * as a {@link DispatchOutcome}: a resolved value is `applied` (a wrapped handler's
 * `{ status: 'duplicate' | 'stale' }`, or a fenced service's answer from `sendFire`, says more); a
 * throw is retried, except a stale token (the term is over), a fire already applied (`DUPLICATE_FIRE`:
 * success) and `FireGivenUpError` (given up, reported). See `outcomeOfResult` and `outcomeOfError`.
 */
export type FireHandler = (envelope: Envelope, context: FireContext) => unknown;

/** The events a scheduler reports about fires, as `scheduler.on(type, listener)` hears them (the logger gets them too). */
export type SchedulerEventMap = { [K in SchedulerEventType]: [Extract<FencedEvent, { type: K }>] };
type SchedulerEventType = 'fire.dispatched' | 'fire.failed' | 'fire.given-up' | 'fire.stale' | 'fire.skipped';

/**
 * Where a job's fires are enqueued: a BullMQ `Queue` as it is, or an adapter
 * (`graphileWorkerQueue`, `pgBossQueue`). `jobId` is the fire's {@link dispatchKey}: the queue drops
 * a second dispatch of a fire by the same term.
 */
export interface QueueLike {
  add(name: string, data: unknown, options: { jobId: string }): Promise<unknown>;
}

export type JobDefinition = Omit<JobOptionsInput, 'handler' | 'queue' | 'payload'> & {
  handler?: FireHandler;
  queue?: QueueLike;
  /** A payload, or a function of the fire's scheduled time (epoch ms) returning one. */
  payload?: unknown;
};

export type CreateSchedulerOptions = Omit<SchedulerOptionsInput, 'coordinator' | 'jobs' | 'logger' | 'meterProvider'> & {
  /** The leadership that gates dispatch: a `Coordinator`, or `group.lease(name)`. */
  coordinator: Leadership;
  /**
   * The OpenTelemetry meter provider the scheduler's instruments come from (docs/operating.md, "Metrics").
   * @defaultValue the global provider of `@opentelemetry/api` when the scheduler is created
   */
  meterProvider?: MeterProvider;
  jobs: Record<string, JobDefinition>;
  logger?: FencedLogger;
  /** Turns each envelope into what is dispatched (for example: signs it). @defaultValue identity */
  seal?: (envelope: Envelope) => Envelope;
  /**
   * Where to resume jobs whose record the lease's store lost (asked once per election that found the record
   * gone, for all those jobs at once): per job, the scheduled time (epoch ms) of its last fire that
   * took effect, from a durable store; leave a job out when nothing is known.
   * @defaultValue the coordinator's fences that can tell (`Fence.lastAppliedFires`: the guards' tables
   * of applied fires), so with a guard attached nothing needs configuring. A job nobody knows about is
   * treated as new, or, when the election found the store behind a fence, caught up over the whole window.
   */
  recoverLastFired?: (jobs: readonly string[]) => Promise<ReadonlyMap<string, number>>;
};

/**
 * The longest a leader sleeps between looks for due fires: it wakes at each fire's due time, and
 * this bounds a sleep toward a far one, whose due time is judged again by a fresh estimate of the
 * server clock (and stays below setTimeout's limit of 2^31 - 1 ms).
 */
const MAX_SLEEP_MS = 1_000;

/** The field that tells the fires hash was initialized (not a valid job name). */
const STATE_MARK = ':initialized';
/** The fires hash's fields of dispatch times, one per job: `:dispatched:<job>` (record-fires-2.lua). */
const DISPATCHED_PREFIX = ':dispatched:';

/** A queued job's mark (see queued-fires.ts), or null when the record has none. */
function queuedFromIn(recorded: Record<string, string>, job: string): number | null {
  const value = recorded[QUEUED_FROM_PREFIX + job];
  const at = value === undefined ? NaN : Number(value);
  return Number.isFinite(at) ? at : null;
}

/** When the last term dispatched its last fire (server clock, epoch ms), from the fires hash. */
function lastDispatchIn(recorded: Record<string, string>): number | null {
  let last: number | null = null;
  for (const [field, value] of Object.entries(recorded)) {
    if (!field.startsWith(DISPATCHED_PREFIX)) continue;
    const at = Number(value);
    if (Number.isFinite(at) && (last === null || at > last)) last = at;
  }
  return last;
}

interface Job {
  readonly name: string;
  readonly schedule: JobSchedule;
  readonly handler: FireHandler | undefined;
  readonly queue: QueueLike | undefined;
  readonly payload: unknown;
  /** Fires due for dispatch, oldest first. */
  readonly pending: number[];
  /** How many of the first pending fires were planned as catch-up at the election. */
  catchUp: number;
  /** The term in which a write of this job was refused as stale: that term dispatches the job no more. */
  staleIn: LeaderTerm | null;
  inFlight: boolean;
  /** In the ready queue (see #pump). */
  queued: boolean;
}

/**
 * The fenced cron scheduler: only the leader dispatches; each fire carries the term's token in the
 * shared envelope; the last dispatched fire per job lives in the lease's store (its `FireLog`),
 * written only by a call that checks the lease there; due times come from that server's clock.
 */
export class Scheduler extends EventEmitter<SchedulerEventMap> {
  readonly #coordinator: Leadership;
  readonly #jobs: ReadonlyMap<string, Job>;
  readonly #misfire: MisfirePolicy;
  readonly #catchUpWindowMs: number;
  readonly #maxCatchUpFires: number;
  readonly #tickMs: number;
  readonly #concurrency: number;
  readonly #retryPolicy: RetryPolicy;
  readonly #logger: FencedLogger | undefined;
  readonly #seal: (envelope: Envelope) => Envelope;
  readonly #records: FireLog;
  readonly #recoverLastFired: ((jobs: readonly string[]) => Promise<ReadonlyMap<string, number>>) | undefined;
  readonly #metrics: SchedulerMetrics;
  /** The previous term's last dispatch, until this term's first one measures the gap. */
  #gapFrom: number | null = null;

  readonly #due = new DueQueue();
  #term: LeaderTerm | null = null;
  #timer: NodeJS.Timeout | undefined;
  /** When the armed tick runs (performance.now()), to arm a sooner one only. */
  #wakeAt = 0;
  #running = false;
  /** Fires in dispatch (a handler or a queue's add running): what `concurrency` bounds. */
  #active = 0;
  /** Drains waiting for a slot to dispatch their job's next fire (a catch-up), first come first served. */
  readonly #slotWaiters: Array<() => void> = [];
  /** Drains running, in dispatch or recording: what stop() waits for. */
  #drains = 0;
  #context: { readonly term: LeaderTerm; readonly context: FireContext } | undefined;
  /** Jobs with fires to dispatch and no drain running, oldest first; `#readyHead` is the next to start. */
  readonly #ready: Job[] = [];
  #readyHead = 0;
  /** Jobs whose drain ended with fires left (more came due meanwhile, or a newer term planned them): the next tick's. */
  readonly #retry: Job[] = [];
  #idle: Array<() => void> = [];
  /** Drains waiting out a retry's backoff: woken at once when the scheduler stands down. */
  readonly #backoffs = new Set<() => void>();
  readonly #onElected = () => void this.#lead();
  readonly #onLost = () => this.#standDown();

  constructor(input: CreateSchedulerOptions) {
    super();
    const options = parseOptions('scheduler', schedulerOptionsSchema, input);
    this.#coordinator = input.coordinator;
    this.#misfire = options.misfire;
    this.#catchUpWindowMs = options.catchUpWindowMs;
    this.#maxCatchUpFires = options.maxCatchUpFires;
    this.#tickMs = options.tickMs;
    this.#concurrency = options.concurrency;
    this.#retryPolicy = options.retry;
    this.#logger = input.logger;
    this.#seal = input.seal ?? ((e) => e);
    this.#records = this.#coordinator.fireLog();
    this.#recoverLastFired = input.recoverLastFired;
    const jobs = new Map<string, Job>();
    for (const [name, def] of Object.entries(input.jobs)) {
      let schedule: JobSchedule;
      try {
        schedule = def.cron !== undefined ? cronSchedule(def.cron, def.timezone) : intervalSchedule(def.everyMs!);
      } catch (err) {
        throw new ConfigError('scheduler', [{ path: `jobs.${name}.cron`, message: (err as Error).message }]);
      }
      jobs.set(name, { name, schedule, handler: def.handler, queue: def.queue, payload: def.payload, pending: [], catchUp: 0, staleIn: null, inFlight: false, queued: false });
    }
    this.#jobs = jobs;
    this.#metrics = new SchedulerMetrics(options.meterProvider as MeterProvider | undefined, this.#coordinator.lease, () =>
      [...jobs.values()].map((job): [string, number] => [job.name, job.pending.length]),
    );
  }

  /** The job names. */
  get jobs(): string[] {
    return [...this.#jobs.keys()];
  }

  /** Starts dispatching whenever the coordinator leads. Start the coordinator too. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#metrics.observe();
    this.#coordinator.on('elected', this.#onElected);
    this.#coordinator.on('lost', this.#onLost);
    if (this.#coordinator.isLeader()) void this.#lead();
  }

  /** Stops dispatching and waits for fires in dispatch to finish. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#coordinator.off('elected', this.#onElected);
    this.#coordinator.off('lost', this.#onLost);
    this.#standDown();
    this.#metrics.unobserve();
    if (this.#drains > 0) await new Promise<void>((resolve) => this.#idle.push(resolve));
  }

  // ---- leadership -------------------------------------------------------------------------

  /** A new term: load what was dispatched, plan the catch-up, start ticking. */
  async #lead(): Promise<void> {
    const term = this.#coordinator.currentTerm();
    if (!this.#running || term === null || term === this.#term) return;
    this.#standDown();
    this.#term = term;
    let recorded: Record<string, string>;
    try {
      recorded = await this.#records.load();
    } catch (error) {
      // Without the record, catch-up would guess: this term waits and asks again while it lasts (a
      // store that stays down ends the term at its deadline; one back in time loses no fire).
      emit(this.#logger, { type: 'lease-store.error', store: this.#coordinator.store.kind, lease: this.#coordinator.lease, nodeId: this.#coordinator.nodeId, operation: 'load fires', error });
      return this.#leadAgain(term);
    }
    const now = this.#coordinator.serverNow();
    if (this.#term !== term || now === null) return;
    this.#gapFrom = lastDispatchIn(recorded);
    // The hash carries a field no job can be named (job names have no colon), written with the first
    // baselines: without it, the records were never kept here or the store lost them.
    const recordLost = recorded[STATE_MARK] === undefined;
    // Two questions to the fences, for different jobs: asked at once (neither rejects; a fence that
    // fails is reported and tells nothing).
    const [lastApplied, queuedOwed] = await Promise.all([this.#askLastApplied(recorded, recordLost, now), this.#askQueuedOwed(recorded, now)]);
    if (this.#term !== term) return;
    const baselines: Array<[string, number]> = recordLost ? [[STATE_MARK, now]] : [];
    for (const job of this.#jobs.values()) {
      const marked = queuedFromIn(recorded, job.name);
      const { last, baseline } = resumePoint({
        recorded: recorded[job.name] === undefined ? null : Number(recorded[job.name]),
        recordLost,
        recovered: recorded[job.name] === undefined ? lastApplied.get(job.name) : undefined,
        // A queued job with a mark is resumed from its record, its unconfirmed fires asked one by
        // one (queuedOwed); without one (kept by a version before the mark) from its last applied fire.
        queuedApplied: job.queue !== undefined && marked === null ? lastApplied.get(job.name) : undefined,
        regressed: term.regressed,
        now,
        catchUpWindowMs: this.#catchUpWindowMs,
      });
      if (baseline !== null) baselines.push([job.name, baseline]);
      const owed = queuedOwed.get(job.name) ?? [];
      if (job.queue !== undefined) {
        // From here on, the queued fires not known to have taken effect: those owed again now, then
        // every fire this term queues. A term that dies before its dispatches leaves the mark where
        // its successor asks about the same fires again.
        const from = owed[0] ?? (last ?? baseline ?? now) + 1;
        if (marked === null || from > marked) baselines.push([QUEUED_FROM_PREFIX + job.name, from]);
      }
      this.#planCatchUp(job, last, now, owed);
    }
    // null: the write failed (the store is unreachable), and says nothing about the lease.
    const written = await Promise.all(baselines.map(([job, scheduledAt]) => this.#records.record(term.leaseValue, { job, scheduledAt }).catch(() => null)));
    if (this.#term !== term) return;
    // Refused: the store does not have this term's lease, so the term cannot keep its books. It ends
    // (see Coordinator.forfeit): a store that fails over to a copy holding the lease would otherwise
    // let it renew, and lead, and dispatch nothing.
    if (written.includes(0)) return this.#forfeit(term);
    if (written.includes(null)) return this.#leadAgain(term);
    this.#tick();
  }

  /** The term's books could not be opened for a passing reason: asks again a tick later, while the term lasts. */
  #leadAgain(term: LeaderTerm): void {
    if (this.#term !== term) return;
    this.#term = null;
    this.#timer = setTimeout(() => void this.#lead(), this.#tickMs);
  }

  /** The store refused a record of `term` as not the holder's: this scheduler stands down and the term ends. */
  #forfeit(term: LeaderTerm): void {
    if (this.#term !== term) return;
    this.#standDown();
    void this.#coordinator.forfeit(term);
  }

  /**
   * Where the applied fires end, from the durable record (the fences), for the jobs that need it:
   * those without a record when the record was lost, and every queued job (queued fires the last
   * term dispatched but no worker applied before this election are refused as stale from now on;
   * see resumePoint). The two lists never share a job (one has no record, the other has one): one
   * question for both.
   */
  async #askLastApplied(recorded: Record<string, string>, recordLost: boolean, now: number): Promise<ReadonlyMap<string, number>> {
    const unrecorded = recordLost ? [...this.#jobs.keys()].filter((name) => recorded[name] === undefined) : [];
    const queued = [...this.#jobs.values()]
      .filter((job) => job.queue !== undefined && recorded[job.name] !== undefined && queuedFromIn(recorded, job.name) === null)
      .map((job) => job.name);
    const asked = [...unrecorded, ...queued];
    if (asked.length === 0) return new Map<string, number>();
    return recoverLastFires({
      jobs: asked,
      now,
      catchUpWindowMs: this.#catchUpWindowMs,
      hook: this.#recoverLastFired,
      fences: this.#coordinator.fences,
      onError: (error) => emit(this.#logger, { type: 'lease-store.error', store: this.#coordinator.store.kind, lease: this.#coordinator.lease, nodeId: this.#coordinator.nodeId, operation: 'recover last fires', error }),
    });
  }

  /**
   * Per queued job with a mark, the fires earlier terms queued from the mark to the job's record
   * (inside the catch-up window) that no fence says took effect: this term dispatches them again.
   * Their queued copies carry a token the election made stale, so a worker's try of one is refused.
   */
  async #askQueuedOwed(recorded: Record<string, string>, now: number): Promise<ReadonlyMap<string, number[]>> {
    const candidates = new Map<string, number[]>();
    for (const job of this.#jobs.values()) {
      const from = queuedFromIn(recorded, job.name);
      if (job.queue === undefined || from === null || recorded[job.name] === undefined) continue;
      const fires = queuedSince(job.schedule, from, Number(recorded[job.name]), now - this.#catchUpWindowMs);
      if (fires.length > 0) candidates.set(job.name, fires);
    }
    if (candidates.size === 0) return candidates;
    return unappliedQueuedFires(candidates, this.#coordinator.fences, (error) =>
      emit(this.#logger, { type: 'lease-store.error', store: this.#coordinator.store.kind, lease: this.#coordinator.lease, nodeId: this.#coordinator.nodeId, operation: 'ask applied queued fires', error }),
    );
  }

  /**
   * Queues a job's fires queued by an earlier term that took no effect (`owed`: dispatched again
   * whatever the misfire policy, which is about fires nobody dispatched), then its catch-up fires
   * after `last` (by the misfire policy), and its next due time.
   */
  #planCatchUp(job: Job, last: number | null, now: number, owed: readonly number[]): void {
    const plan = planCatchUp(job.schedule, last, now, this.#misfire, this.#catchUpWindowMs, this.#maxCatchUpFires);
    job.pending.push(...owed, ...plan.fires);
    this.#markReady(job);
    job.catchUp = owed.length + plan.fires.length;
    this.#metrics.skipped(job.name, plan.skipped);
    if (plan.skipped > 0 || plan.beforeWindow) {
      this.#report({
        type: 'fire.skipped',
        lease: this.#coordinator.lease,
        nodeId: this.#coordinator.nodeId,
        job: job.name,
        missed: plan.skipped,
        reason: plan.beforeWindow ? `misfire ${this.#misfire}; fires before the catch-up window too` : `misfire ${this.#misfire}`,
      });
    }
    if (plan.next !== null) this.#due.push(job.name, plan.next);
  }

  /** Counts a dispatch; returns the failover gap (ms) when it is the first of a term that follows another. */
  #countDispatch(job: Job, scheduledAt: number, dispatchedAt: number | null, term: LeaderTerm): number | null {
    const caughtUp = this.#term === term && job.catchUp > 0;
    if (caughtUp) job.catchUp--;
    this.#metrics.dispatched(job.name, dispatchedAt === null ? null : dispatchedAt - scheduledAt, caughtUp);
    if (this.#gapFrom === null || dispatchedAt === null || this.#term !== term) return null;
    const gapMs = Math.max(0, dispatchedAt - this.#gapFrom);
    this.#gapFrom = null;
    this.#metrics.failoverGap(gapMs);
    return gapMs;
  }

  #standDown(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#term = null;
    this.#due.clear();
    this.#gapFrom = null;
    this.#ready.length = 0;
    this.#readyHead = 0;
    this.#retry.length = 0;
    for (const job of this.#jobs.values()) {
      job.pending.length = 0;
      job.catchUp = 0;
      job.staleIn = null;
      job.queued = false;
    }
    for (const wake of [...this.#backoffs]) wake();
  }

  /** Reports an event about fires to the logger and to this emitter's listeners; neither can break a dispatch. */
  #report(event: Extract<FencedEvent, { type: SchedulerEventType }>): void {
    emit(this.#logger, event);
    if (this.listenerCount(event.type) === 0) return;
    try {
      (this.emit as (type: string, event: unknown) => boolean)(event.type, event);
    } catch {
      // A listener that throws must not turn a dispatched fire into a lost one.
    }
  }

  /**
   * Moves due fires to their jobs and dispatches. Runs at the next due time (by the server clock, as
   * this process estimates it), a tick after a drain ended with fires left, and at least every
   * {@link MAX_SLEEP_MS} while leading. Waking exactly when a fire is due keeps a job's lateness at
   * timer precision, and a leader with nothing due sleeps instead of polling (a poll every tick was
   * 40 wake-ups a second per scheduler, for nothing).
   */
  #tick(): void {
    this.#timer = undefined;
    const term = this.#term;
    if (term === null) return;
    if (this.#coordinator.currentTerm() !== term) return this.#standDown();
    const now = this.#coordinator.serverNow();
    let delay = this.#tickMs;
    if (now !== null) {
      for (let entry = this.#due.popDue(now); entry !== undefined; entry = this.#due.popDue(now)) {
        const job = this.#jobs.get(entry.job)!;
        job.pending.push(entry.at);
        this.#markReady(job);
        const next = job.schedule.nextAfter(entry.at);
        if (next !== null) this.#due.push(job.name, next);
      }
      // Jobs whose last drain ended with fires left get their turn a tick later (a failed fire is
      // retried inside its drain, after a backoff). Only those and the newly due are looked at, so a
      // tick costs what is due, not the number of jobs.
      for (const job of this.#retry.splice(0)) this.#markReady(job);
      this.#pump(term);
      const next = this.#due.nextAt();
      // Never early: popDue compares with the server clock, so a wake-up a little before the due
      // time finds nothing and waits again, 1 ms at a time. The longest sleep is bounded, so that a
      // far fire (a monthly cron) is still looked at by a fresh estimate of the server clock.
      delay = next === undefined ? MAX_SLEEP_MS : Math.min(MAX_SLEEP_MS, Math.max(1, Math.ceil(next - now)));
    }
    this.#wakeIn(delay);
  }

  /** Arms the next tick in `ms`, unless one is armed sooner already. */
  #wakeIn(ms: number): void {
    const at = performance.now() + ms;
    if (this.#timer !== undefined && this.#wakeAt <= at) return;
    clearTimeout(this.#timer);
    this.#wakeAt = at;
    this.#timer = setTimeout(() => this.#tick(), ms);
  }

  #markReady(job: Job): void {
    if (job.inFlight || job.queued || job.pending.length === 0) return;
    if (job.staleIn !== null && job.staleIn === this.#term) return;
    job.queued = true;
    this.#ready.push(job);
  }

  /**
   * Starts drains for ready jobs while dispatch slots are free. A slot is held while a fire is in
   * dispatch and freed before its record is written, so a burst of due fires (10,000 jobs due in the
   * same second) is handed out as fast as handlers take it, with the records batched behind; the
   * ready queue keeps each start O(1).
   */
  #pump(term: LeaderTerm): void {
    while (this.#active < this.#concurrency && this.#readyHead < this.#ready.length) {
      const job = this.#ready[this.#readyHead++]!;
      job.queued = false;
      if (job.inFlight || job.pending.length === 0) continue;
      job.inFlight = true;
      this.#active++;
      this.#drains++;
      void this.#drain(job, term);
    }
    if (this.#readyHead === this.#ready.length) {
      this.#ready.length = 0;
      this.#readyHead = 0;
    }
  }

  /** What the events about one fire say. */
  #fireFields(job: Job, fire: string, term: LeaderTerm) {
    return { lease: this.#coordinator.lease, nodeId: this.#coordinator.nodeId, job: job.name, fireId: fire, token: term.token };
  }

  /** The context handed to in-process handlers: one per term, shared by its fires. */
  #contextOf(term: LeaderTerm): FireContext {
    if (this.#context?.term !== term) this.#context = { term, context: Object.freeze({ signal: term.signal, timeoutMs: this.#coordinator.ttlMs }) };
    return this.#context.context;
  }

  /** Hands one fire to its queue or handler, and reads how that ended. */
  async #dispatch(job: Job, envelope: Envelope, term: LeaderTerm): Promise<DispatchOutcome> {
    try {
      if (job.queue !== undefined) {
        await job.queue.add(job.name, envelope, { jobId: dispatchKey(envelope) });
        return ENQUEUED;
      }
      return outcomeOfResult(await job.handler!(envelope, this.#contextOf(term)));
    } catch (error) {
      return outcomeOfError(error);
    }
  }

  /** The envelope of one fire of this term (the payload function and the seal may throw). */
  #envelopeOf(job: Job, scheduledAt: number, term: LeaderTerm): Envelope {
    return this.#seal(
      createEnvelope({
        job: job.name,
        scheduledAt,
        token: term.token,
        issuer: this.#coordinator.nodeId,
        payload: typeof job.payload === 'function' ? (job.payload as (at: number) => unknown)(scheduledAt) : job.payload,
      }),
    );
  }

  /** Waits out a retry's backoff; ends early when the term ends or the scheduler stands down. */
  #backoff(ms: number, term: LeaderTerm): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        term.signal.removeEventListener('abort', wake);
        this.#backoffs.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      term.signal.addEventListener('abort', wake, { once: true });
      this.#backoffs.add(wake);
    });
  }

  /** Takes a dispatch slot, waiting for one when all are in use. */
  async #takeSlot(): Promise<void> {
    if (this.#active < this.#concurrency) {
      this.#active++;
      return;
    }
    await new Promise<void>((resolve) => this.#slotWaiters.push(resolve));
  }

  /** Frees a dispatch slot: to a drain waiting for one, else to the next ready job. */
  #releaseSlot(term: LeaderTerm): void {
    const waiter = this.#slotWaiters.shift();
    if (waiter !== undefined) return waiter(); // the slot passes on: #active stays
    this.#active--;
    if (this.#term === term) this.#pump(term);
  }

  /**
   * Delivers a job's pending fires in order, recording each once it is settled; stops when the term
   * ends. Enters holding a dispatch slot (#pump took it for the first fire) and holds one only while
   * a fire is in dispatch: a retry's backoff and the record are waited for without one.
   *
   * A fire is settled when it took effect (applied, or a duplicate of a dispatch that did) or was
   * given up (by its handler, or after it fell out of the catch-up window). Until then it is
   * dispatched again after a backoff, and the job's later fires wait behind it. A fire refused as
   * stale, or one still failing when the term ends, is not recorded: the record is where the next
   * term's catch-up starts, so that term dispatches it again.
   */
  async #drain(job: Job, term: LeaderTerm): Promise<void> {
    let holding = true;
    try {
      for (let n = 0; job.pending.length > 0; n++) {
        if (n > 0) {
          // More than one fire in one drain is a catch-up batch.
          if (failpoints.armed) await failpoints.hit('scheduler.mid-catch-up');
          await this.#takeSlot();
          holding = true;
          // While it waited, the scheduler may have stood down (stop() clears the pending fires
          // while the coordinator still leads).
          if (this.#term !== term || job.pending.length === 0) return;
        }
        const scheduledAt = job.pending[0]!;
        let envelope: Envelope | undefined;
        let dispatchedAt: number | null = null;
        let gapMs: number | null = null;
        let outcome: DispatchOutcome;
        let attempt = 0;
        for (;;) {
          attempt++;
          // Self-fence before every dispatch: the term must still be current by our own deadline.
          if (this.#coordinator.currentTerm() !== term) return;
          let current: DispatchOutcome | undefined;
          try {
            envelope ??= this.#envelopeOf(job, scheduledAt, term);
          } catch (error) {
            // The job's payload function or the seal threw: nothing was dispatched; try again.
            current = { status: 'failed-retryable', error };
          }
          if (current === undefined) {
            if (dispatchedAt === null) {
              dispatchedAt = this.#coordinator.serverNow();
              gapMs = this.#countDispatch(job, scheduledAt, dispatchedAt, term);
              // Built only for a logger or a listener: in a burst, every object made per fire is garbage to collect.
              if (this.#logger !== undefined || this.listenerCount('fire.dispatched') > 0) this.#report({ type: 'fire.dispatched', ...this.#fireFields(job, envelope!.fireId, term) });
            }
            current = await this.#dispatch(job, envelope!, term);
          }
          outcome = current;
          if (outcome.status !== 'failed-retryable') break;
          const error = outcome.error;
          this.#metrics.failed(job.name);
          const now = this.#coordinator.serverNow();
          const termGoesOn = this.#term === term && this.#coordinator.currentTerm() === term;
          const inWindow = now === null || now - scheduledAt <= this.#catchUpWindowMs;
          const retryInMs = termGoesOn && inWindow ? retryDelayMs(attempt, this.#retryPolicy) : null;
          this.#report({ type: 'fire.failed', ...this.#fireFields(job, fireId(job.name, scheduledAt), term), error, attempt, retryInMs });
          if (!inWindow && termGoesOn) {
            outcome = { status: 'failed-permanent', reason: `still failing after ${attempt} dispatches when it fell out of the catch-up window (${this.#catchUpWindowMs} ms)`, error };
            break;
          }
          // The term is over: the fire was not recorded, so the next term's catch-up dispatches it.
          if (retryInMs === null) return;
          this.#releaseSlot(term);
          holding = false;
          await this.#backoff(retryInMs, term);
          if (this.#term !== term) return;
          await this.#takeSlot();
          holding = true;
          if (this.#term !== term || job.pending[0] !== scheduledAt) return;
        }
        const fire = fireId(job.name, scheduledAt);
        if (outcome.status === 'stale') {
          // A newer token wrote: this term no longer leads, whatever its own deadline says yet. It
          // leaves the fire, unrecorded, to the next term's catch-up, dispatches this job no more, and
          // ends: were the newer token minted before the lease store lost its latest writes, this
          // node would still hold the lease, and every write of its term would be refused for good.
          this.#metrics.stale(job.name);
          this.#report({ type: 'fire.stale', ...this.#fireFields(job, fire, term) });
          if (this.#term === term) {
            job.staleIn = term;
            void this.#coordinator.supersede(term, outcome.highest);
          }
          return;
        }
        if (outcome.status === 'failed-permanent') {
          this.#metrics.givenUp(job.name);
          this.#report({ type: 'fire.given-up', ...this.#fireFields(job, fire, term), reason: outcome.reason, attempts: attempt, ...(outcome.error === undefined ? {} : { error: outcome.error }) });
        }
        // Settled: the slot goes to the next fire while this one is recorded.
        this.#releaseSlot(term);
        holding = false;
        // The term may have ended while the handler ran, and a new term may already have planned this
        // job's fires again (this very one included): its pending list is not ours to touch any more,
        // nor is the record.
        if (this.#term !== term) return;
        job.pending.shift();
        if (failpoints.armed) await failpoints.hit('scheduler.dispatched-before-record');
        // Recorded once settled: a crash in between dispatches the fire again (at-least-once), which
        // the guard's dedupe on fireId makes harmless. The script refuses a stale lease.
        let recorded: number;
        try {
          recorded = await this.#records.record(term.leaseValue, { job: job.name, scheduledAt, dispatchedAt }, gapMs);
        } catch (error) {
          emit(this.#logger, { type: 'lease-store.error', store: this.#coordinator.store.kind, lease: this.#coordinator.lease, nodeId: this.#coordinator.nodeId, operation: 'record fire', error });
          continue;
        }
        if (recorded !== 1) {
          // The lease is not ours any more, by the store as it is now: the term ends here, not at
          // the next renew, which a store failed over to a copy holding the lease would let pass.
          this.#forfeit(term);
          return;
        }
      }
    } finally {
      job.inFlight = false;
      this.#drains--;
      if (this.#drains === 0) for (const resolve of this.#idle.splice(0)) resolve();
      // Fires left (of this term, or planned by a newer one while this drain ran) wait for the next
      // tick (see #tick).
      if (this.#term !== null && job.pending.length > 0) {
        this.#retry.push(job);
        this.#wakeIn(this.#tickMs);
      }
      if (holding) this.#releaseSlot(term);
    }
  }
}

/** A queue took the fire: for the scheduler, delivered (the worker's write is fenced in its turn). */
const ENQUEUED: DispatchOutcome = Object.freeze({ status: 'applied' });

/**
 * Creates a scheduler on a coordinator.
 *
 * @throws {ConfigError} for a bad cron expression, time zone, interval, or job name.
 * @example
 * ```ts
 * const scheduler = createScheduler({
 *   coordinator,
 *   jobs: { invoices: { cron: '0 * * * *', timezone: 'Europe/Paris', handler: (envelope) => handle(envelope) } },
 *   misfire: 'all',
 * });
 * scheduler.start();
 * await coordinator.start();
 * ```
 */
export function createScheduler(options: CreateSchedulerOptions): Scheduler {
  return new Scheduler(options);
}
