import { EventEmitter } from 'node:events';
import {
  NotLeaderError,
  parseToken,
  type Fence,
  type FencedLogger,
  type LeaseLossReason,
  type Token,
} from '@fenced/shared';
import { failpoints, type FailpointName } from '@fenced/shared/failpoints';
import { emit, parseOptions, withTimeout } from '@fenced/shared/internal';
import { commandTimeoutMs, coordinatorOptionsSchema, defaultDriftMs, defaultNodeId, type CoordinatorOptionsInput } from './coordinator-options.js';
import { leaseScripts, type LeaseScripts } from './lease-scripts.js';
import { formatLeaseValue, parseLeaseValue } from './lease-value.js';
import { judgeFenceAnswers, type FenceVerdict } from './fence-verdict.js';
import { listenForReleases, type ReleaseListener } from './release-listener.js';
import { evictionProblem } from './redis-config.js';
import type { RedisClient } from '../redis-client.js';
import { backoffMs, jitter } from '../internal/timing.js';
import { monotonicClock, type Clock } from './clock.js';
import { leaseKeys, type LeaseKeys } from './lease-keys.js';
import { ServerClock } from './server-clock.js';
import type { GroupSeat } from './group-seat.js';
import { primaryConfirmer, type PrimaryConfirmer } from './sentinel-primary.js';
import { LeaseMetrics } from '../metrics/lease-metrics.js';
import type { MeterProvider } from '@opentelemetry/api';

/** One term of leadership: what a leader acts with. */
export interface LeaderTerm {
  readonly token: Token;
  /** The lease value in Redis, `<token>:<nodeId>`: scripts that check the lease compare it. */
  readonly leaseValue: string;
  /** Aborts when this term ends (loss, stop, or deadline). */
  readonly signal: AbortSignal;
  /**
   * True when this election found Redis behind a fence (it lost data): state kept in Redis, such as
   * the scheduler's record of dispatched fires, may be missing too.
   */
  readonly regressed: boolean;
}

export interface CoordinatorEventMap {
  elected: [{ token: Token }];
  /**
   * `endedAt`: when the term ended, on the coordinator's monotonic clock (`performance.now()` unless
   * a clock was injected). For `deadline` it is the deadline itself: from that instant on
   * `isLeader()` answered false, though timers that run late (a loaded or paused process) deliver
   * this event after it.
   */
  lost: [{ token: Token; reason: LeaseLossReason; endedAt: number }];
  regression: [{ token: Token; fenceHighest: Token; resource: string; total: number }];
  error: [Error];
}

export type CreateCoordinatorOptions = Omit<CoordinatorOptionsInput, 'redis' | 'fences' | 'logger' | 'clock' | 'meterProvider'> & {
  meterProvider?: MeterProvider;
  /** An ioredis `Redis` (single server or Sentinel) or `Cluster`, ioredis 5 or 6. */
  redis: RedisClient;
  fences?: readonly Fence[];
  logger?: FencedLogger;
  clock?: Clock;
};

/** How many elections the lease's stream keeps (trimmed exactly: elections are rare). */
const ELECTIONS_KEPT = 32;

type State =
  | { kind: 'stopped' }
  | { kind: 'standby' }
  | { kind: 'leader'; term: LeaderTerm; controller: AbortController; deadline: number };

/**
 * Leader election on a Redis lease. Every election mints a fencing token above every earlier
 * election's; the node counts itself leader only until a local monotonic deadline.
 */
export class Coordinator extends EventEmitter<CoordinatorEventMap> {
  readonly lease: string;
  readonly nodeId: string;
  readonly keys: LeaseKeys;
  readonly ttlMs: number;
  readonly renewIntervalMs: number;
  readonly driftMs: number;

  readonly #redis: RedisClient;
  readonly #scripts: LeaseScripts;
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
  #failures = 0;
  #regressions = 0;
  #attempt: Promise<void> | undefined;
  /** A release was heard while `#attempt` was in flight (see `#wake`). */
  #wokenDuringAttempt = false;
  readonly #seat: GroupSeat | undefined;
  /** Sentinel clients only: is the connection on the primary the sentinels name? (sentinel-primary.ts) */
  readonly #primary: PrimaryConfirmer | undefined;

  /** @param seat set by a lease group, which then owns the subscription and the balance. */
  constructor(input: CreateCoordinatorOptions, seat?: GroupSeat) {
    super();
    const options = parseOptions('coordinator', coordinatorOptionsSchema, input);
    // An unheard 'error' event must not kill the host process.
    this.on('error', () => {});
    this.#redis = input.redis; // validated as an ioredis client by the schema
    this.lease = options.lease;
    this.nodeId = options.nodeId ?? defaultNodeId();
    this.keys = leaseKeys(options.keyPrefix, options.lease);
    this.ttlMs = options.ttlMs;
    this.renewIntervalMs = options.renewIntervalMs;
    this.driftMs = options.driftMs ?? defaultDriftMs(options.ttlMs);
    this.#acquireRetryMs = options.acquireRetryMs ?? options.renewIntervalMs;
    this.#fences = options.fences as readonly Fence[];
    this.#logger = options.logger as FencedLogger | undefined;
    this.#clock = (options.clock as Clock | undefined) ?? monotonicClock;
    this.#serverClock = new ServerClock(this.#clock);
    this.#scripts = leaseScripts(this.#redis);
    this.#seat = seat;
    this.#primary = primaryConfirmer(this.#redis, this.#commandTimeoutMs());
    this.#metrics = new LeaseMetrics(options.meterProvider as MeterProvider | undefined, this.lease, () => this.currentTerm()?.token ?? null);
  }

  /** The fences advanced at every election (the scheduler also reads applied fires from them). */
  get fences(): readonly Fence[] {
    return this.#fences;
  }

  /** The Redis client the coordinator runs its scripts on. */
  get redis(): RedisClient {
    return this.#redis;
  }

  /** Regressions of the Redis token counter detected at election (docs/fencing-model.md: "never trust a lower counter"). */
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
    this.#metrics.observe();
    await this.#subscribe();
    if (this.#seat === undefined) void this.#checkRedisConfig(); // a group checks once for all
    await this.#runAttempt();
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
      this.#loseLeadership(state, 'deadline');
      return null;
    }
    return state.term;
  }

  /** The Redis server's time now (epoch ms), carried forward locally; null before any reply. */
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

  #runAttempt(): Promise<void> {
    if (this.#attempt !== undefined) return this.#attempt;
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

  async #acquire(): Promise<void> {
    // Regressions found at election restart it at once, a bounded number of times in a row.
    let regressed = false;
    for (let round = 0; round < 5; round++) {
      if (this.#state.kind !== 'standby') return;
      if (this.#seat !== undefined && !this.#seat.wants()) return this.#scheduleAttempt(jitter(this.#seat.idleRetryMs));
      const sentAt = this.#clock.now();
      let reply: Array<string | number>;
      try {
        const sent = withTimeout(this.#scripts.acquire(this.keys.lease, this.keys.counter, this.nodeId, this.ttlMs), this.#commandTimeoutMs(), 'acquire');
        reply = await (failpoints.armed ? replyAfterFailpoint(sent, 'lease.acquire-sent-before-reply') : sent);
      } catch (error) {
        this.#redisFailed('acquire', error);
        return this.#scheduleAttempt(backoffMs(this.#failures, 50, this.#acquireRetryMs));
      }
      const receivedAt = this.#clock.now();
      const repliedAt = performance.now();
      const repliedFrom = this.#primary?.connected();
      this.#failures = 0;
      if (this.#state.kind !== 'standby') {
        // Stopped while the request was in flight: give back what we may just have won.
        if (reply[0] === 1) {
          const won = parseToken(String(reply[1]));
          await this.#release(formatLeaseValue(won, this.nodeId), won);
        }
        return;
      }

      if (reply[0] !== 1) {
        const [, holder, pttl, sec, usec] = reply;
        this.#serverClock.sample(sec!, usec!, receivedAt);
        const held = typeof holder === 'string' ? parseLeaseValue(holder) : null;
        if (held !== null && held.nodeId === this.nodeId) {
          // Ours from an attempt whose reply we gave up on: hand it back rather than wait a TTL.
          await this.#release(holder as string, held.token);
          continue;
        }
        const wait = Math.min(Math.max(Number(pttl), 0) + 5, this.#acquireRetryMs);
        return this.#scheduleAttempt(jitter(wait, 0.1));
      }

      const [, tokenText, sec, usec] = reply;
      this.#serverClock.sample(sec!, usec!, receivedAt);
      const token = parseToken(String(tokenText));
      const leaseValue = formatLeaseValue(token, this.nodeId);
      const deadline = sentAt + this.ttlMs - this.driftMs;
      if (failpoints.armed) await failpoints.hit('lease.acquired-before-dispatch');

      // Sentinel: an election counts only on the primary the sentinels name (sentinel-primary.ts).
      if (this.#primary !== undefined && !(await this.#primary.names(repliedFrom, repliedAt))) {
        this.#redisFailed('acquire', new NotOnPrimaryError(repliedFrom));
        await this.#release(leaseValue, token, false);
        return this.#scheduleAttempt(backoffMs(this.#failures, 50, this.#acquireRetryMs));
      }

      // Fence every resource before dispatching anything: this refuses the deposed leader on every
      // resource at once, and proves the token is above everything ever committed.
      const verdict = await this.#advanceFences(token);
      if (verdict.kind === 'regressed') {
        regressed = true;
        await this.#repairCounter(verdict.highest);
        await this.#release(leaseValue, token);
        continue;
      }
      if (verdict.kind === 'unavailable') {
        // Cannot prove the token is fresh: do not lead (fail closed).
        await this.#release(leaseValue, token);
        return this.#scheduleAttempt(jitter(this.#acquireRetryMs));
      }
      if (this.#state.kind !== 'standby' || this.#clock.now() >= deadline) {
        await this.#release(leaseValue, token);
        if (this.#state.kind === 'standby') return this.#scheduleAttempt(0);
        return;
      }

      const controller = new AbortController();
      this.#state = { kind: 'leader', term: { token, leaseValue, signal: controller.signal, regressed }, controller, deadline };
      this.#armDeadline();
      this.#scheduleRenew(this.renewIntervalMs);
      this.#metrics.elected();
      this.#noteElection(token, regressed);
      emit(this.#logger, { type: 'lease.acquired', lease: this.lease, nodeId: this.nodeId, token });
      this.emit('elected', { token });
      return;
    }
    this.#scheduleAttempt(jitter(this.#acquireRetryMs));
  }

  /**
   * Appends the election to the lease's capped stream, for `fenced status` and `fenced doctor`. Not
   * awaited and never fatal: it is a record for operators, and the term is already decided.
   */
  #noteElection(token: Token, regressed: boolean): void {
    this.#redis
      .xadd(this.keys.elections, 'MAXLEN', String(ELECTIONS_KEPT), '*', 'token', token.toString(), 'node', this.nodeId, 'ttl', String(this.ttlMs), 'fences', String(this.#fences.length), 'regressed', regressed ? '1' : '0')
      .catch(() => {});
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

  /** Raises the Redis counter to the highest token a fence holds, so the next election mints above it. */
  async #repairCounter(highest: Token): Promise<void> {
    try {
      await withTimeout(this.#scripts.raiseCounter(this.keys.counter, highest.toString()), this.#commandTimeoutMs(), 'raise counter');
    } catch (error) {
      this.#redisFailed('raise counter', error);
    }
  }

  #scheduleAttempt(delayMs: number): void {
    if (this.#state.kind !== 'standby') return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#runAttempt(), delayMs);
  }

  // ---- leadership -------------------------------------------------------------------------

  #scheduleRenew(delayMs: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#renew(), delayMs);
  }

  async #renew(): Promise<void> {
    const state = this.#state;
    if (state.kind !== 'leader') return;
    if (this.currentTerm() === null) return; // the deadline passed while the timer waited (a pause)
    const sentAt = this.#clock.now();
    const remainingMs = state.deadline - sentAt;
    // Waiting past the deadline is pointless: by then the term is over anyway.
    const budget = () => Math.max(1, Math.min(this.#commandTimeoutMs(), state.deadline - this.#clock.now()));
    let reply: Array<string | number>;
    let receivedAt: number;
    try {
      const sent = withTimeout(this.#scripts.renew(this.keys.lease, state.term.leaseValue, this.ttlMs), budget(), 'renew');
      reply = await (failpoints.armed ? replyAfterFailpoint(sent, 'lease.renew-sent-before-reply') : sent);
      receivedAt = this.#clock.now();
      // Sentinel: a renew counts only on the primary the sentinels name (sentinel-primary.ts).
      const repliedAt = performance.now();
      const repliedFrom = this.#primary?.connected();
      if (this.#primary !== undefined && reply[0] === 1 && !(await withTimeout(this.#primary.names(repliedFrom, repliedAt), budget(), 'confirm primary'))) {
        throw new NotOnPrimaryError(repliedFrom);
      }
    } catch (error) {
      this.#redisFailed('renew', error);
      // Keep leading until the deadline at most, retrying sooner than usual meanwhile.
      if (this.#state === state) this.#scheduleRenew(Math.max(10, Math.floor(this.renewIntervalMs / 4)));
      return;
    }
    if (this.#state !== state) return;
    this.#serverClock.sample(reply[1]!, reply[2]!, receivedAt);
    if (reply[0] !== 1) {
      this.#loseLeadership(state, 'stolen');
      return;
    }
    this.#metrics.renewed(receivedAt - sentAt, remainingMs);
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

  #loseLeadership(state: Extract<State, { kind: 'leader' }>, reason: LeaseLossReason): void {
    if (this.#state !== state) return;
    this.#state = { kind: 'standby' };
    this.#clearTimers();
    this.#endTerm(state, reason);
    // Best effort: if the lease is still ours in Redis (the renew was lost on the way), free it now.
    void this.#release(state.term.leaseValue, state.term.token, false).finally(() => this.#scheduleAttempt(jitter(50)));
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
      const released = await withTimeout(
        this.#scripts.release(this.keys.lease, this.keys.released, leaseValue),
        this.#commandTimeoutMs(),
        'release',
      );
      if (released === 1 && announce) emit(this.#logger, { type: 'lease.released', lease: this.lease, nodeId: this.nodeId, token });
    } catch (error) {
      this.#redisFailed('release', error);
    }
  }

  // ---- plumbing ---------------------------------------------------------------------------

  async #subscribe(): Promise<void> {
    const onRelease = () => this.#wake();
    const listener: ReleaseListener =
      this.#seat === undefined
        ? await listenForReleases(this.#redis, this.keys.released, this.#commandTimeoutMs(), { onRelease, onError: (error) => this.#redisFailed('subscribe', error) })
        : { close: await this.#seat.listen(this.keys.released, onRelease) };
    // stop() may have come while the subscription was being set up.
    if (this.#state.kind === 'stopped') listener.close();
    else this.#subscriber = listener;
  }

  /** Reports Redis settings that make leases unsafe. */
  async #checkRedisConfig(): Promise<void> {
    const problem = await evictionProblem(this.#redis, this.#commandTimeoutMs());
    if (problem !== null) emit(this.#logger, { type: 'redis.config', lease: this.lease, nodeId: this.nodeId, problem });
  }

  #redisFailed(operation: string, error: unknown): void {
    this.#failures++;
    emit(this.#logger, { type: 'redis.error', lease: this.lease, nodeId: this.nodeId, operation, error });
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

/** A request's reply, awaited only after `failpoint` (armed) has run while the request is in flight. */
async function replyAfterFailpoint<T>(sent: Promise<T>, failpoint: FailpointName): Promise<T> {
  sent.catch(() => undefined); // awaited below; a rejection meanwhile is not unhandled
  await failpoints.hit(failpoint);
  return sent;
}

/** A reply came from a server that the sentinels do not all name as the primary. */
class NotOnPrimaryError extends Error {
  constructor(server: string | undefined) {
    super(`the reply came from ${server ?? 'a closed connection'}, not the primary every sentinel names (a failover in progress)`);
  }
}

/**
 * Creates a coordinator. Call `start()` to join the election.
 *
 * @throws {ConfigError} for bad options (names the option).
 * @example
 * ```ts
 * const coordinator = createCoordinator({ redis, lease: 'billing', ttlMs: 15_000, renewIntervalMs: 5_000, fences: [guard] });
 * coordinator.on('elected', ({ token }) => log.info({ token }, 'leading'));
 * await coordinator.start();
 * ```
 */
export function createCoordinator(options: CreateCoordinatorOptions): Coordinator {
  return new Coordinator(options);
}
