import { EventEmitter } from 'node:events';
import {
  NotLeaderError,
  type Fence,
  type FencedLogger,
  type LeaseLossReason,
  type Token,
} from '@fenced/shared';
import { failpoints, type FailpointName } from '@fenced/shared/failpoints';
import { emit, parseOptions } from '@fenced/shared/internal';
import { commandTimeoutMs, coordinatorOptionsSchema, defaultDriftMs, defaultNodeId } from './coordinator-options.js';
import { judgeFenceAnswers, type FenceVerdict } from './fence-verdict.js';
import type { AcquireReply, InFlight, LeaseStore, ReleaseListener } from '../store/lease-store.js';
import type { LeaseBackend } from '../store/lease-backend.js';
import { givenStore } from './given-store.js';
import type { FireLog } from '../store/fire-log.js';
import { backoffMs, jitter } from '../internal/timing.js';
import { monotonicClock, type Clock } from '../internal/clock.js';
import { ServerClock } from './server-clock.js';
import type { GroupSeat } from './group-seat.js';
import type { CoordinatorEventMap, CreateCoordinatorOptions, LeaderTerm } from './coordinator-types.js';
import { LeaseMetrics } from '../metrics/lease-metrics.js';
import type { MeterProvider } from '@opentelemetry/api';

export type { CoordinatorEventMap, CreateCoordinatorOptions, LeaderTerm } from './coordinator-types.js';


type State =
  | { kind: 'stopped' }
  | { kind: 'standby' }
  | { kind: 'leader'; term: LeaderTerm; controller: AbortController; deadline: number };

/**
 * Leader election on a lease in a store (any `LeaseBackend`: one per folder under store/). Every election
 * mints a fencing token above every earlier election's; the node counts itself leader only until a
 * local monotonic deadline counted from the acquire's send.
 */
export class Coordinator extends EventEmitter<CoordinatorEventMap> {
  readonly lease: string;
  readonly nodeId: string;
  /** The store the lease lives in (`redisLeases`, `postgresLeases`). */
  readonly store: LeaseBackend;
  readonly ttlMs: number;
  readonly renewIntervalMs: number;
  readonly driftMs: number;

  readonly #store: LeaseStore;
  #fireLog: FireLog | undefined;
  readonly #fences: readonly Fence[];
  readonly #logger: FencedLogger | undefined;
  readonly #clock: Clock;
  readonly #serverClock: ServerClock;
  readonly #acquireRetryMs: number;
  readonly #metrics: LeaseMetrics;

  #state: State = { kind: 'stopped' };
  #timer: NodeJS.Timeout | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;
  #subscriber: ReleaseListener | undefined;
  /** A subscription is being set up (see `#ensureSubscribed`). */
  #subscribing = false;
  /** How many times `start()` has run: a subscription set up for an earlier run is not this run's. */
  #runs = 0;
  #failures = 0;
  #regressions = 0;
  #attempt: Promise<void> | undefined;
  /** A release was heard while `#attempt` was in flight (see `#wake`). */
  #wokenDuringAttempt = false;
  readonly #seat: GroupSeat | undefined;

  /** @param seat set by a lease group, which then owns the subscription and the balance. */
  constructor(input: CreateCoordinatorOptions, seat?: GroupSeat) {
    super();
    const options = parseOptions('coordinator', coordinatorOptionsSchema, input);
    // An unheard 'error' event must not kill the host process.
    this.on('error', () => {});
    this.lease = options.lease;
    this.nodeId = options.nodeId ?? defaultNodeId();
    // A state machine names no store: createCoordinator (create.ts) turns `{ redis }` into one.
    this.store = givenStore('coordinator', input.store);
    this.ttlMs = options.ttlMs;
    this.renewIntervalMs = options.renewIntervalMs;
    this.driftMs = options.driftMs ?? defaultDriftMs(options.ttlMs);
    this.#acquireRetryMs = options.acquireRetryMs ?? options.renewIntervalMs;
    this.#fences = options.fences as readonly Fence[];
    this.#logger = options.logger as FencedLogger | undefined;
    this.#clock = (options.clock as Clock | undefined) ?? monotonicClock;
    this.#serverClock = new ServerClock(this.#clock);
    this.#store = this.store.openLease(this.lease, this.nodeId, this.#commandTimeoutMs());
    this.#seat = seat;
    this.#metrics = new LeaseMetrics(options.meterProvider as MeterProvider | undefined, this.lease, () => this.currentTerm()?.token ?? null);
  }

  /** The fences advanced at every election (the scheduler also reads applied fires from them). */
  get fences(): readonly Fence[] {
    return this.#fences;
  }

  /** The scheduler's record of fires, kept in the lease's store beside the lease. */
  fireLog(): FireLog {
    this.#fireLog ??= this.store.fireLog(this.lease);
    return this.#fireLog;
  }

  /** Regressions of the store's token counter detected at election (docs/fencing-model.md: "never trust a lower counter"). */
  get regressions(): number {
    return this.#regressions;
  }

  /**
   * Joins the election. Resolves after the first attempt to acquire, won or not; the node keeps
   * trying in the background until `stop()`.
   */
  async start(): Promise<void> {
    if (this.#state.kind !== 'stopped') return;
    this.#state = { kind: 'standby' };
    this.#runs++;
    this.#metrics.observe();
    await this.#ensureSubscribed();
    if (this.#seat === undefined) void this.#checkStoreConfig(); // a group checks once for all
    // The subscription was just tried: a failure is not tried again by this first attempt (one
    // outage, one report), but by the next one or the first renewal.
    await this.#runAttempt({ subscribe: false });
  }

  /**
   * A leader gives the lease up and stays in the election as a standby: its term ends first, then
   * the lease is released and the standbys woken, so the next leader never overlaps with it.
   * Nothing happens on a node that does not lead.
   */
  async handOver(): Promise<void> {
    const state = this.#state;
    if (state.kind !== 'leader') return;
    this.#state = { kind: 'standby' };
    this.#clearTimers();
    this.#endTerm(state, 'handover');
    await this.#release(state.term.leaseValue, state.term.token);
    this.#scheduleAttempt(jitter(this.#seat?.idleRetryMs ?? this.#acquireRetryMs));
  }

  /**
   * Ends `term` because a write of it was refused as stale (the scheduler calls this; so may any
   * caller that writes with the term's token): a fence holds a newer token, so the term can never
   * write again, whatever its lease says. Usually a later term leads and this node's lease is already
   * gone; but after the lease store lost its latest writes (a failover to an asynchronous replica),
   * a token minted before the loss can raise a fence after this term's election, and this node then
   * still holds the lease and renews it, leading a term whose every write is refused: no fire would
   * take effect again. So the term ends here, the store's counter is raised to `highest` (the
   * fence's token, when known) and the lease given back; the next election mints above the fence
   * (and repairs the counter itself from the fences it advances). Nothing happens unless `term` is
   * the current term.
   */
  async supersede(term: LeaderTerm, highest?: Token): Promise<void> {
    const state = this.#state;
    if (state.kind !== 'leader' || state.term !== term) return;
    await this.#loseLeadership(state, 'superseded', highest);
  }

  /**
   * Ends `term` because the lease store refused a write beside the lease as not the holder's (the
   * scheduler's fire record, which the store checks against the lease in the same step): the store,
   * as it is now, does not have this term's lease. Usually the next renew finds that too; but a store
   * that fails over to a copy still holding the lease (an asynchronous replica) lets that renew
   * succeed, and a term that kept leading after its scheduler stood down would dispatch nothing again.
   * So the term ends here (`lease.lost`, reason `stolen`), the lease is given back if the store holds
   * it after all, and this node stands in the next election. Nothing happens unless `term` is the
   * current term.
   */
  async forfeit(term: LeaderTerm): Promise<void> {
    const state = this.#state;
    if (state.kind !== 'leader' || state.term !== term) return;
    await this.#loseLeadership(state, 'stolen');
  }

  /** Leaves the election; a leader releases its lease and wakes the standbys at once. */
  async stop(): Promise<void> {
    const state = this.#state;
    this.#state = { kind: 'stopped' };
    this.#clearTimers();
    if (state.kind === 'leader') {
      this.#endTerm(state, 'stopped');
      await this.#release(state.term.leaseValue, state.term.token);
    }
    const subscriber = this.#subscriber;
    this.#subscriber = undefined;
    subscriber?.close();
    await this.#attempt?.catch(() => undefined);
    this.#metrics.unobserve();
  }

  /**
   * True while this node holds the lease and its local deadline (request sent + TTL − drift) is in
   * the future. Checked on the monotonic clock every call: a process that was paused longer than
   * its lease knows it no longer leads the moment it resumes.
   */
  isLeader(): boolean {
    return this.currentTerm() !== null;
  }

  /** The current term's token, or null when not leading. */
  token(): Token | null {
    return this.currentTerm()?.token ?? null;
  }

  /** The current term, or null when not leading (and the term ends here if its deadline passed). */
  currentTerm(): LeaderTerm | null {
    const state = this.#state;
    if (state.kind !== 'leader') return null;
    if (this.#clock.now() >= state.deadline) {
      void this.#loseLeadership(state, 'deadline');
      return null;
    }
    return state.term;
  }

  /** The store server's time now (epoch ms), carried forward locally; null before any reply. */
  serverNow(): number | null {
    return this.#serverClock.now();
  }

  /**
   * Runs `fn` with the current term; its signal aborts when leadership ends.
   *
   * @throws {NotLeaderError} when this node does not lead.
   * @example
   * ```ts
   * await coordinator.withLeadership(async ({ token, signal }) => {
   *   for (const batch of batches) { signal.throwIfAborted(); await process(batch, token); }
   * });
   * ```
   */
  async withLeadership<T>(fn: (term: LeaderTerm) => Promise<T>): Promise<T> {
    const term = this.currentTerm();
    if (term === null) throw new NotLeaderError(this.lease, 'this node does not hold the lease');
    return fn(term);
  }

  // ---- election ---------------------------------------------------------------------------

  #runAttempt({ subscribe = true } = {}): Promise<void> {
    if (this.#attempt !== undefined) return this.#attempt;
    // The subscription failed to start (the store was down): each attempt (and renewal) tries it again.
    if (subscribe && this.#subscriber === undefined) void this.#ensureSubscribed();
    this.#attempt = this.#acquire().finally(() => {
      this.#attempt = undefined;
      // A release heard while this attempt was in flight: the attempt may have seen the lease still
      // held and scheduled its retry a whole interval away. Try again now instead.
      if (this.#wokenDuringAttempt) {
        this.#wokenDuringAttempt = false;
        this.#wake();
      }
    });
    return this.#attempt;
  }

  /** The lease was released: a standby tries at once (after the attempt in flight, if one is). */
  #wake(): void {
    if (this.#state.kind !== 'standby') return;
    if (this.#attempt !== undefined) {
      this.#wokenDuringAttempt = true;
      return;
    }
    clearTimeout(this.#timer);
    void this.#runAttempt();
  }

  /**
   * Election rounds until one decides: leading, waiting for the holder, or backing off. A round the
   * counter regressed in (or whose lease turned out to be ours already) starts the next at once, a
   * bounded number of times in a row.
   */
  async #acquire(): Promise<void> {
    let regressed = false;
    for (let round = 0; round < 5; round++) {
      const outcome = await this.#acquireRound(regressed);
      if (outcome === 'decided') return;
      regressed ||= outcome === 'regressed';
    }
    this.#scheduleAttempt(jitter(this.#acquireRetryMs));
  }

  /** One acquire, and what came of it; every way out but 'again' and 'regressed' has scheduled what comes next. */
  async #acquireRound(regressedBefore: boolean): Promise<'decided' | 'again' | 'regressed'> {
    if (this.#state.kind !== 'standby') return 'decided';
    if (this.#seat !== undefined && !this.#seat.wants()) {
      this.#scheduleAttempt(jitter(this.#seat.idleRetryMs));
      return 'decided';
    }
    // The deadline counts from the send: the grant may have been made the moment it arrived.
    const sentAt = this.#clock.now();
    let reply: AcquireReply;
    try {
      reply = await this.#store.acquire(this.ttlMs, this.#commandTimeoutMs(), this.#inFlight('lease.acquire-sent-before-reply'));
    } catch (error) {
      this.#storeFailed('acquire', error);
      this.#scheduleAttempt(backoffMs(this.#failures, 50, this.#acquireRetryMs));
      return 'decided';
    }
    const receivedAt = this.#clock.now();
    this.#failures = 0;
    if (this.#state.kind !== 'standby') {
      // Stopped while the request was in flight: give back what we may just have won.
      if (reply.won) await this.#release(reply.leaseValue, reply.token);
      return 'decided';
    }
    this.#serverClock.sample(reply.time.sec, reply.time.usec, receivedAt);
    if ((reply.endedWrites ?? 0) > 0) emit(this.#logger, { type: 'lease.takeover', lease: this.lease, nodeId: this.nodeId, ended: reply.endedWrites! });
    if (!reply.won) {
      if (reply.holder?.ours === true) {
        // Ours from an attempt whose reply we gave up on: hand it back rather than wait a TTL.
        await this.#release(reply.holder.value, reply.holder.token);
        return 'again';
      }
      this.#scheduleAttempt(jitter(Math.min(reply.remainingMs + 5, this.#acquireRetryMs), 0.1));
      return 'decided';
    }
    return this.#confirmElection(reply, sentAt + this.ttlMs - this.driftMs, regressedBefore);
  }

  /**
   * A grant becomes a term only once it is proven: from the server that counts, above every fence,
   * still standing by, and before its deadline. Anything else gives the lease back (fail closed).
   */
  async #confirmElection(won: Extract<AcquireReply, { won: true }>, deadline: number, regressed: boolean): Promise<'decided' | 'regressed'> {
    const { token, leaseValue } = won;
    if (failpoints.armed) await failpoints.hit('lease.acquired-before-dispatch');
    const notCounted = await won.confirmServer();
    if (notCounted !== null) {
      this.#storeFailed('acquire', notCounted);
      await this.#release(leaseValue, token, false);
      this.#scheduleAttempt(backoffMs(this.#failures, 50, this.#acquireRetryMs));
      return 'decided';
    }
    // Fence every resource before dispatching anything: this refuses the deposed leader on every
    // resource at once, and proves the token is above everything ever committed.
    const verdict = await this.#advanceFences(token);
    if (verdict.kind === 'regressed') {
      await this.#repairCounter(verdict.highest);
      await this.#release(leaseValue, token);
      return 'regressed';
    }
    if (verdict.kind === 'unavailable') {
      // Cannot prove the token is fresh: do not lead.
      await this.#release(leaseValue, token);
      this.#scheduleAttempt(jitter(this.#acquireRetryMs));
      return 'decided';
    }
    if (this.#state.kind !== 'standby' || this.#clock.now() >= deadline) {
      await this.#release(leaseValue, token);
      if (this.#state.kind === 'standby') this.#scheduleAttempt(0);
      return 'decided';
    }
    this.#beginTerm(token, leaseValue, deadline, regressed);
    return 'decided';
  }

  #beginTerm(token: Token, leaseValue: string, deadline: number, regressed: boolean): void {
    const controller = new AbortController();
    this.#state = { kind: 'leader', term: { token, leaseValue, signal: controller.signal, regressed }, controller, deadline };
    this.#armDeadline();
    this.#scheduleRenew(this.renewIntervalMs);
    this.#metrics.elected();
    // A record for operators, not awaited and never fatal: the term is already decided.
    this.#store.recordElection({ token, ttlMs: this.ttlMs, fences: this.#fences.length, regressed });
    emit(this.#logger, { type: 'lease.acquired', lease: this.lease, nodeId: this.nodeId, token });
    this.emit('elected', { token });
  }

  /** Advances every fence to `token` at once and decides the election from their answers. */
  async #advanceFences(token: Token): Promise<FenceVerdict> {
    const answers = judgeFenceAnswers(this.#fences, await Promise.allSettled(this.#fences.map((fence) => fence.advance(token))));
    for (const { resource, highest } of answers.ahead) {
      this.#regressions++;
      this.#metrics.regressed();
      emit(this.#logger, { type: 'token.regression', lease: this.lease, nodeId: this.nodeId, token, fenceHighest: highest, resource });
      this.emit('regression', { token, fenceHighest: highest, resource, total: this.#regressions });
    }
    for (const { resource, error } of answers.unreachable) {
      emit(this.#logger, { type: 'fence.unavailable', lease: this.lease, nodeId: this.nodeId, token, resource, error });
    }
    return answers.verdict;
  }

  /** Raises the store's counter to the highest token a fence holds, so the next election mints above it. */
  async #repairCounter(highest: Token): Promise<void> {
    try {
      await this.#store.raiseCounter(highest, this.#commandTimeoutMs());
    } catch (error) {
      this.#storeFailed('raise counter', error);
    }
  }

  /** The failpoint to run while a request is in flight, when failpoints are armed. */
  #inFlight(failpoint: FailpointName): InFlight | undefined {
    return failpoints.armed ? () => failpoints.hit(failpoint) : undefined;
  }

  #scheduleAttempt(delayMs: number): void {
    if (this.#state.kind !== 'standby') return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#runAttempt(), delayMs);
  }

  // ---- leadership -------------------------------------------------------------------------

  #scheduleRenew(delayMs: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#renew(), this.#onGrid(delayMs));
  }

  /**
   * On a store that batches renewals, a renew due in `delayMs` goes at the grid point before it
   * instead (a multiple of the renew interval on the monotonic clock): never later than due, so the
   * lease is renewed at least as often, and every lease of the process renews at the same moments.
   */
  #onGrid(delayMs: number): number {
    if (this.store.batchesRenewals !== true || delayMs < this.renewIntervalMs) return delayMs;
    const now = this.#clock.now();
    const due = now + delayMs;
    return Math.max(0, Math.floor(due / this.renewIntervalMs) * this.renewIntervalMs - now);
  }

  async #renew(): Promise<void> {
    const state = this.#state;
    if (state.kind !== 'leader') return;
    if (this.currentTerm() === null) return; // the deadline passed while the timer waited (a pause)
    const sentAt = this.#clock.now();
    const remainingMs = state.deadline - sentAt;
    // Waiting past the deadline is pointless: by then the term is over anyway.
    const budget = () => Math.max(1, Math.min(this.#commandTimeoutMs(), state.deadline - this.#clock.now()));
    let reply: { renewed: boolean; time: { sec: string | number; usec: string | number } };
    try {
      reply = await this.#store.renew(state.term.leaseValue, this.ttlMs, budget, this.#inFlight('lease.renew-sent-before-reply'));
    } catch (error) {
      this.#storeFailed('renew', error);
      // Keep leading until the deadline at most, retrying sooner than usual meanwhile.
      if (this.#state === state) this.#scheduleRenew(Math.max(10, Math.floor(this.renewIntervalMs / 4)));
      return;
    }
    const receivedAt = this.#clock.now();
    if (this.#state !== state) return;
    this.#serverClock.sample(reply.time.sec, reply.time.usec, receivedAt);
    if (!reply.renewed) {
      void this.#loseLeadership(state, 'stolen');
      return;
    }
    this.#metrics.renewed(receivedAt - sentAt, remainingMs);
    // A leader whose subscription failed (elected while the store refused it) subscribes again now
    // that the store answers: it hears releases the moment its term ends, not a retry later.
    if (this.#subscriber === undefined) void this.#ensureSubscribed();
    // The new deadline counts from when the request was sent: the reply may have come late.
    state.deadline = Math.max(state.deadline, sentAt + this.ttlMs - this.driftMs);
    this.#armDeadline();
    if (this.currentTerm() !== null) this.#scheduleRenew(this.renewIntervalMs);
  }

  /** Ends the term at its deadline even when no one calls isLeader() (timers fire late after a pause). */
  #armDeadline(): void {
    const state = this.#state;
    if (state.kind !== 'leader') return;
    clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = setTimeout(() => void this.currentTerm(), Math.max(0, state.deadline - this.#clock.now()) + 1);
  }

  /**
   * Ends the term at once, then gives the lease back and stands by. A fence's token above the term's
   * (`highest`, when a write was refused as stale) first raises the store's counter to it.
   */
  async #loseLeadership(state: Extract<State, { kind: 'leader' }>, reason: LeaseLossReason, highest?: Token): Promise<void> {
    if (this.#state !== state) return;
    this.#state = { kind: 'standby' };
    this.#clearTimers();
    this.#endTerm(state, reason);
    try {
      if (highest !== undefined && highest > state.term.token) await this.#repairCounter(highest);
      // Best effort: if the lease is still ours in the store (the renew was lost on the way), free it now.
      await this.#release(state.term.leaseValue, state.term.token, false);
    } finally {
      this.#scheduleAttempt(jitter(50));
    }
  }

  #endTerm(state: Extract<State, { kind: 'leader' }>, reason: LeaseLossReason): void {
    state.controller.abort(new NotLeaderError(this.lease, `leadership ended: ${reason}`));
    this.#metrics.lost(reason);
    emit(this.#logger, { type: 'lease.lost', lease: this.lease, nodeId: this.nodeId, token: state.term.token, reason });
    const endedAt = reason === 'deadline' ? state.deadline : this.#clock.now();
    // Listeners run on the next tick: isLeader() may end a term and must not call user code inline.
    process.nextTick(() => this.emit('lost', { token: state.term.token, reason, endedAt }));
  }

  async #release(leaseValue: string, token: Token, announce = true): Promise<void> {
    try {
      const released = await this.#store.release(leaseValue, this.#commandTimeoutMs());
      if (released && announce) emit(this.#logger, { type: 'lease.released', lease: this.lease, nodeId: this.nodeId, token });
    } catch (error) {
      this.#storeFailed('release', error);
    }
  }

  // ---- plumbing ---------------------------------------------------------------------------

  /**
   * Subscribes to the lease's releases unless subscribed or subscribing. A failure is reported, not
   * thrown: the release notice only makes a standby try sooner, and the election must go on without
   * it (a start whose subscription failed once left the lease never competed for); the next attempt
   * tries again.
   */
  async #ensureSubscribed(): Promise<void> {
    if (this.#subscribing || this.#subscriber !== undefined || this.#state.kind === 'stopped') return;
    this.#subscribing = true;
    const run = this.#runs;
    const current = () => this.#runs === run && this.#state.kind !== 'stopped';
    try {
      const listener = await this.#listen();
      // A stop came while it was being set up, and maybe a start after it: the subscription is an
      // earlier run's (in a lease group, on the release hub that stop closed: it would never hear a
      // release again, and, being set, would never be made again).
      if (current()) this.#subscriber = listener;
      else listener.close();
    } catch (error) {
      // An earlier run's subscription failing (its hub closed) is not this run's failure.
      if (current()) this.#storeFailed('subscribe', error);
    } finally {
      this.#subscribing = false;
    }
    // The start that came meanwhile found a subscription being set up and went on: it subscribes now.
    if (this.#runs !== run) await this.#ensureSubscribed();
  }

  async #listen(): Promise<ReleaseListener> {
    const onRelease = () => this.#wake();
    return this.#seat === undefined
      ? this.#store.listenForReleases(
          this.#commandTimeoutMs(),
          onRelease,
          (error) => this.#storeFailed('subscribe', error),
          (mode, reason) => emit(this.#logger, { type: 'lease.listening', lease: this.lease, nodeId: this.nodeId, mode, reason }),
        )
      : { close: await this.#seat.listen(onRelease) };
  }

  /** Reports store settings that make leases unsafe. */
  async #checkStoreConfig(): Promise<void> {
    const problem = await this.store.configProblem(this.#commandTimeoutMs()).catch(() => null);
    if (problem !== null) emit(this.#logger, { type: 'lease-store.config', store: this.store.kind, lease: this.lease, nodeId: this.nodeId, problem });
  }

  #storeFailed(operation: string, error: unknown): void {
    this.#failures++;
    emit(this.#logger, { type: 'lease-store.error', store: this.store.kind, lease: this.lease, nodeId: this.nodeId, operation, error });
    this.emit('error', error instanceof Error ? error : new Error(String(error)));
  }

  #commandTimeoutMs(): number {
    return commandTimeoutMs(this.ttlMs);
  }

  #clearTimers(): void {
    clearTimeout(this.#timer);
    clearTimeout(this.#deadlineTimer);
    this.#timer = undefined;
    this.#deadlineTimer = undefined;
  }
}
