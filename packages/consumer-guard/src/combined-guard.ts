import { failpoints } from '@fenced/shared/failpoints';
import { ConfigError, isFencedError, parseToken, StaleTokenError, type Fence, type FencedLogger, type Token, type TokenInput } from '@fenced/shared';
import { emit } from '@fenced/shared/internal';
import type { GuardOptions } from './guard-options.js';
import type { GuardPort } from './guard-port.js';
import type { GuardMetrics } from './metrics/guard-metrics.js';
import { parseLowerFenceRequest, type AppliedFire, type AppliedOutcome, type AuditEntry, type GuardInspection, type LowerFenceRequest } from './fence-records.js';
import { fenceGuardOver, type FenceGuard, type FenceGuardIn } from './fence-guard.js';
import type { BatchFire, FenceStore } from './fence-store.js';
import type { FastPath } from './fast-path.js';
import { fireWriteArguments, parseWriteArguments, type WriteArguments } from './write-arguments.js';
import type { GuardedWriteContext, GuardedWriteOptions, TransactionExecutor } from './write-context.js';

/**
 * The combined guard: the fence store (PostgreSQL or MySQL) is the authority, Redis the fast path. A
 * Redis refusal is final (no transaction is opened); a Redis acceptance still goes through the
 * store's check; after a commit the Redis mark is raised. With Redis down the guard works on the
 * store alone (and says so in an event); it never accepts on Redis alone. A mark Redis lost is
 * rebuilt from the store's answers.
 *
 * Every method that takes a token parses it once, here at the edge; below, the token is a `Token`.
 */
export interface CombinedGuard<Trx> extends Fence {
  /** The default resource. */
  readonly resource: string;
  /** The store's guard underneath (PostgreSQL or MySQL), without the fast path. */
  readonly store: FenceGuard<Trx>;
  /** Creates or upgrades the store's fence tables (see {@link FenceGuard.migrate}). */
  migrate(): Promise<void>;
  /**
   * Refuses a stale token before any work starts (so a handler never starts effects outside the
   * database for a deposed leader): on Redis when it answers, else with a plain read of the
   * store's fence. Advisory: the write's own transaction is the authority.
   * @throws {StaleTokenError} when the token is below the mark or the fence.
   */
  precheck(token: TokenInput): Promise<void>;
  /**
   * Runs `fn` in a transaction that checks and raises the fence first (see
   * {@link FenceGuard.guardedWrite}); a Redis refusal ends the call before any transaction opens.
   */
  guardedWrite<T>(token: TokenInput, fn: (trx: Trx, ctx: GuardedWriteContext) => Promise<T>, options?: GuardedWriteOptions<T>): Promise<T>;
  /**
   * The same check inside a transaction the caller holds (see {@link FenceGuardIn.guardedWriteIn}):
   * a transaction of the store's driver, a Kysely transaction, or an `executeSql` executor.
   * @throws {ConfigError} on a store without caller-held transactions (the in-memory one).
   */
  guardedWriteIn<T, Tx extends Trx | TransactionExecutor = TransactionExecutor>(tx: Tx, token: TokenInput, fn: (tx: Tx, ctx: GuardedWriteContext) => Promise<T>, options?: GuardedWriteOptions<T>): Promise<T>;
  /** The highest committed token of the default resource (the store's), or `null`. */
  highest(): Promise<Token | null>;
  /** Strictly raises the default resource's fence to `token`, then the mark. */
  advance(token: TokenInput): Promise<void>;
  /** A {@link Fence} on another resource (the store's fence, Redis mark kept in step). */
  fence(resource: string): Fence;
  /** The audited lowering of a fence (see {@link FenceGuard.lowerFence}); the mark is reset to it. */
  lowerFence(request: LowerFenceRequest): Promise<Token | null>;
  inspect(): Promise<GuardInspection>;
  auditLog(resource?: string, limit?: number): Promise<AuditEntry[]>;
  /**
   * Deletes applied-fire records older than `olderThanMs` (default: the `appliedFireRetentionMs`
   * option, 7 days). Run it periodically, for example as a fenced cron job.
   */
  pruneAppliedFires(olderThanMs?: number): Promise<number>;
  lastAppliedFire(): Promise<AppliedFire | null>;
  lastAppliedFires(since: Date): Promise<ReadonlyMap<string, number>>;
  /** See {@link FenceGuard.appliedFireIds}. */
  appliedFireIds(fireIds: readonly string[]): Promise<ReadonlySet<string>>;
  /** See {@link FenceGuard.appliedOutcome}. */
  appliedOutcome(fireId: string, resource?: string): Promise<AppliedOutcome | null>;
  /**
   * Records the refusals not yet in Redis (each is recorded a turn of the event loop after it was
   * returned) and waits for them: call it before closing the Redis client, or a refusal made just
   * before `redis.quit()` never reaches `fenced status`. The guard stays usable.
   */
  close(): Promise<void>;
}

/** The combined guard, and the port the handler layer is built on. */
export interface CombinedGuardParts {
  readonly guard: CombinedGuard<unknown>;
  /** The port of the guard's own resource. Its write skips the Redis check (see below). */
  readonly port: GuardPort<unknown>;
  /** The same port, its write bound to a transaction the caller holds (pg-boss `transactional`). */
  portIn(tx: TransactionExecutor): GuardPort<TransactionExecutor>;
}

/**
 * The combined guard over its two stores: the fence store (the authority) and, when a Redis client
 * was given, the fast path. `logger` is already observed by `metrics`.
 */
export function combinedGuard(options: GuardOptions, store: FenceStore, fastPath: FastPath | undefined, logger: FencedLogger | undefined, metrics: GuardMetrics): CombinedGuardParts {
  const raiseMark = async (resource: string, token: Token) => fastPath?.raise(resource, token);
  /**
   * After the store refused a write as stale: the refusal goes on the record, and a mark below the
   * fence (Redis lost data, or missed a commit) is repaired from the authority.
   */
  const afterRefusal = async (err: unknown, fireId: string | null): Promise<void> => {
    if (!isFencedError(err, 'STALE_TOKEN')) return;
    fastPath?.recordRefusal(err.resource, err.token, err.highest, store.kind, fireId ?? undefined);
    await raiseMark(err.resource, err.highest);
  };

  async function precheck(resource: string, token: Token, fireId?: string): Promise<void> {
    if (fastPath !== undefined && (await fastPath.check(resource, token, fireId))) return;
    const startedAt = performance.now();
    const highest = await store.highest(resource);
    metrics.check(startedAt, resource, store.kind);
    if (highest !== null && token < highest) {
      emit(logger, { type: 'token.rejected', resource, token, highest, via: store.kind });
      fastPath?.recordRefusal(resource, token, highest, store.kind, fireId);
      throw new StaleTokenError(resource, token, highest);
    }
  }

  /** The authoritative write, with the mark kept in step with what the store decided. */
  async function writeInStore<T>(args: WriteArguments, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>): Promise<T> {
    try {
      const result = await store.write(args, fn);
      if (failpoints.armed) await failpoints.hit('guard.committed-before-mark');
      await raiseMark(args.resource, args.token);
      return result;
    } catch (err) {
      await afterRefusal(err, args.fireId);
      throw err;
    }
  }

  async function writeInTransaction<T>(tx: TransactionExecutor, args: WriteArguments, fn: (tx: TransactionExecutor, ctx: GuardedWriteContext) => Promise<T>): Promise<T> {
    try {
      // No mark is raised on success: the caller commits later, or not at all, and a mark must never
      // get ahead of what the store committed.
      if (store.writeIn === undefined) {
        throw new ConfigError('guardedWriteIn', [{ path: 'tx', message: `the ${store.kind} fence store writes in transactions of its own only: use guardedWrite` }]);
      }
      return await store.writeIn(tx, args, fn);
    } catch (err) {
      await afterRefusal(err, args.fireId);
      throw err;
    }
  }

  async function guardedWrite<T>(token: TokenInput, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>, writeOptions?: GuardedWriteOptions<T>): Promise<T> {
    const args = parseWriteArguments('guardedWrite', token, fn, writeOptions, options.resource);
    // A refusal here is final; an acceptance, or no answer, still goes to the store.
    await fastPath?.check(args.resource, args.token, args.fireId ?? undefined);
    return writeInStore(args, fn);
  }

  const fence = (resource: string): Fence => {
    const storeFence = store.fence(resource);
    return Object.freeze({
      resource: storeFence.resource,
      highest: () => storeFence.highest(),
      lastAppliedFires: (since: Date) => storeFence.lastAppliedFires!(since),
      appliedFireIds: (fireIds: readonly string[]) => storeFence.appliedFireIds!(fireIds),
      async advance(token: Token) {
        await storeFence.advance(token);
        await raiseMark(storeFence.resource, token);
      },
    });
  };

  const checkedFn = (fn: unknown) => {
    if (typeof fn !== 'function') throw new TypeError('ctx.guardedWrite: fn must be a function');
  };
  // The handler's port. Its write skips the Redis check: the handler's pre-check asked Redis a moment
  // ago, and asking again would cost every fire a round trip to learn nothing new. The fire id comes
  // from an envelope already validated, the resource is the guard's own.
  const port: GuardPort<unknown> = Object.freeze({
    resource: options.resource,
    precheck: (token: Token, fireId: string) => precheck(options.resource, token, fireId),
    guardedWrite: async <T>(token: Token, fireId: string, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>, issuer?: string, recordOutcome?: (result: T) => string) => {
      checkedFn(fn);
      return writeInStore(fireWriteArguments(token, options.resource, fireId, issuer, recordOutcome), fn);
    },
    appliedOutcome: (fireId: string) => store.appliedOutcome(options.resource, fireId),
  });
  const portIn = (tx: TransactionExecutor): GuardPort<TransactionExecutor> => ({
    resource: options.resource,
    precheck: port.precheck,
    guardedWrite: async (token, fireId, fn, issuer, recordOutcome) => {
      checkedFn(fn);
      return writeInTransaction(tx, fireWriteArguments(token, options.resource, fireId, issuer, recordOutcome), fn);
    },
    appliedOutcome: port.appliedOutcome,
    ...(store.checkBatchIn === undefined
      ? {}
      : {
          async checkBatch(fires: readonly BatchFire[]) {
            const verdicts = await store.checkBatchIn!(tx, options.resource, fires);
            // Each refusal goes on the record operators read. The mark is not raised: the fence a
            // stale fire was judged against may be the batch's own raise, not committed yet.
            verdicts.forEach((v, i) => v.verdict === 'stale' && fastPath?.recordRefusal(options.resource, fires[i]!.token, v.fence, store.kind, fires[i]!.fireId));
            return verdicts;
          },
        }),
  });

  const storeGuard = fenceGuardOver(store);
  const guard: CombinedGuard<unknown> = Object.freeze({
    resource: options.resource,
    store: storeGuard,
    migrate: () => store.migrate(),
    precheck: async (token: TokenInput) => precheck(options.resource, parseToken(token)),
    guardedWrite,
    guardedWriteIn: async <T, Tx>(tx: Tx, token: TokenInput, fn: (tx: Tx, ctx: GuardedWriteContext) => Promise<T>, writeOptions?: GuardedWriteOptions<T>) =>
      writeInTransaction(tx as TransactionExecutor, parseWriteArguments('guardedWriteIn', token, fn, writeOptions, options.resource), fn as unknown as (tx: TransactionExecutor, ctx: GuardedWriteContext) => Promise<T>),
    highest: () => store.highest(options.resource),
    async advance(tokenInput: TokenInput) {
      const token = parseToken(tokenInput);
      await store.advance(options.resource, token);
      await raiseMark(options.resource, token);
    },
    fence,
    async lowerFence(request: LowerFenceRequest) {
      const parsed = parseLowerFenceRequest(request, options.resource);
      const previous = await store.lowerFence(parsed);
      // The mark never goes down by itself: reset it to the new fence as part of the admin act.
      await fastPath?.reset(parsed.resource, parsed.token);
      return previous;
    },
    pruneAppliedFires: (olderThanMs = options.appliedFireRetentionMs) => store.pruneAppliedFires(olderThanMs),
    lastAppliedFire: () => store.lastAppliedFire(),
    inspect: () => store.inspect(),
    auditLog: (resource?: string, limit?: number) => store.auditLog(resource, limit),
    lastAppliedFires: (since: Date) => store.lastAppliedFires(options.resource, since),
    appliedFireIds: (fireIds: readonly string[]) => storeGuard.appliedFireIds(fireIds),
    appliedOutcome: (fireId: string, resource?: string) => storeGuard.appliedOutcome(fireId, resource),
    close: async () => {
      await fastPath?.flush();
    },
  });
  return { guard, port, portIn };
}
