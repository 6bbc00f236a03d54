import { DuplicateFireError, FenceAheadError, parseResource, SchemaMissingError, SchemaTooNewError, StaleTokenError, type Fence, type Token } from '@fenced/shared';
import { emit } from '@fenced/shared/internal';
import { checkPruneAge, latestFireByJob, type AppliedFire, type AuditEntry, type GuardInspection, type ParsedLowerFenceRequest } from '../fence-records.js';
import type { FenceStore, FenceStoreContext } from '../fence-store.js';
import { advanceWithTakeover, type TakeoverPolicy, type TakeoverStore } from '../takeover/advance-with-takeover.js';
import type { WriteArguments } from '../write-arguments.js';
import type { GuardedWriteContext } from '../write-context.js';
import { MEMORY_MIGRATION, type MemoryFenceDatabase } from './memory-database.js';

export interface MemoryStoreOptions {
  readonly database: MemoryFenceDatabase;
  /** The election-time takeover of a frozen writer of a lower token (as on the SQL stores). */
  readonly takeover: TakeoverPolicy | false;
}

const INSTALLATION = 'the in-memory fence store';

/** The fence store over a `MemoryFenceDatabase`: every promise of the SQL stores, in one process. */
export function memoryFenceStore(options: MemoryStoreOptions, context: FenceStoreContext): FenceStore {
  const { database: db, takeover } = options;
  const { metrics } = context;
  const logger = metrics.observing(context.logger);

  const migrated = () => {
    if (!db.migrations.has(MEMORY_MIGRATION)) throw new SchemaMissingError(INSTALLATION, { cause: undefined });
  };

  async function run<T>(args: WriteArguments, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>): Promise<T> {
    migrated();
    const { token, resource, fireId } = args;
    const tx = db.begin();
    const release = await db.lock(resource, { session: tx.session, token }, 0);
    try {
      const fence = db.fences.get(resource) ?? null;
      if (fence !== null && fence > token) {
        emit(logger, { type: 'token.rejected', resource, token, highest: fence, via: 'memory' });
        throw new StaleTokenError(resource, token, fence);
      }
      if (fireId !== null && db.claims(resource).has(fireId)) {
        emit(logger, { type: 'guard.duplicate', resource, token, fireId });
        throw new DuplicateFireError(resource, fireId);
      }
      // A session ended under fn fails the write, whatever fn goes on doing: nothing of it commits.
      const result = await Promise.race([fn(tx, { token, resource, attempt: 1 }), tx.ended]);
      const outcome = args.recordOutcome === undefined ? null : args.recordOutcome(result);
      if (tx.isEnded()) await tx.ended;
      // The commit: the rows, the raise and the claim in one synchronous step.
      db.applyRows(tx);
      if (fence === null || token > fence) db.fences.set(resource, token);
      if (fireId !== null) db.claims(resource).set(fireId, { token, outcome, appliedAt: new Date() });
      emit(logger, { type: 'token.accepted', resource, token });
      return result;
    } catch (err) {
      if (tx.isEnded()) emit(logger, { type: 'guard.unavailable', resource, error: err });
      throw err;
    } finally {
      db.close(tx);
      release();
    }
  }

  const takeoverStore: TakeoverStore<string> = {
    startAdvance(resource, token, timeoutMs) {
      const session = db.newSession();
      const done = (async () => {
        const release = await db.lock(resource, { session, token: null }, timeoutMs);
        try {
          const fence = db.fences.get(resource) ?? null;
          if (fence !== null && fence >= token) throw new FenceAheadError(resource, token, fence);
          db.fences.set(resource, token);
        } finally {
          release();
        }
      })();
      return { waiter: Promise.resolve(session), done };
    },
    async endBlockers(waiter, token) {
      const blocker = db.blockerOf(waiter);
      // Only a guarded write that announced a lower token: never one of the same or a higher token.
      if (blocker === null || blocker.token === null || blocker.token >= token) return [];
      return [{ session: blocker.session, token: blocker.token, ended: db.kill(blocker.session) }];
    },
  };

  async function advance(resource: string, token: Token): Promise<void> {
    migrated();
    await advanceWithTakeover(takeoverStore, resource, token, takeover, (blocker) =>
      emit(logger, { type: 'guard.takeover', resource, token, blockingToken: blocker.token, session: blocker.session, ended: blocker.ended }),
    );
    emit(logger, { type: 'fence.advanced', resource, token });
  }

  async function highest(resource: string): Promise<Token | null> {
    migrated();
    return db.fences.get(resource) ?? null;
  }

  async function lastAppliedFires(resource: string, since: Date): Promise<ReadonlyMap<string, number>> {
    migrated();
    const ids = [...db.claims(resource)].filter(([, claim]) => claim.appliedAt >= since).map(([fireId]) => fireId);
    // Within a job the largest id is the latest fire: read in order, the last one read wins.
    return latestFireByJob(ids.sort());
  }

  async function appliedFireIds(resource: string, fireIds: readonly string[]): Promise<ReadonlySet<string>> {
    migrated();
    const claims = db.claims(resource);
    return new Set(fireIds.filter((fireId) => claims.has(fireId)));
  }

  const fence = (name: string): Fence => {
    const resource = parseResource(name);
    return {
      resource,
      highest: () => highest(resource),
      advance: (token) => advance(resource, token),
      lastAppliedFires: (since) => lastAppliedFires(resource, since),
      appliedFireIds: (fireIds) => appliedFireIds(resource, fireIds),
    };
  };

  async function lowerFence(request: ParsedLowerFenceRequest): Promise<Token | null> {
    migrated();
    const session = db.newSession();
    const release = await db.lock(request.resource, { session, token: null }, 0);
    try {
      const previous = db.fences.get(request.resource) ?? null;
      db.fences.set(request.resource, request.token);
      db.audit.push({ resource: request.resource, from: previous, to: request.token, actor: request.actor, reason: request.reason, at: new Date() });
      emit(logger, { type: 'fence.lowered', resource: request.resource, from: previous, to: request.token, actor: request.actor, reason: request.reason });
      return previous;
    } finally {
      release();
    }
  }

  async function inspect(): Promise<GuardInspection> {
    const applied = [...db.applied.values()].flatMap((claims) => [...claims.values()]);
    return {
      store: 'memory',
      migrations: { applied: Math.max(0, ...db.migrations), known: MEMORY_MIGRATION },
      fences: [...db.fences].map(([resource, token]) => {
        const claims = [...db.claims(resource)];
        return {
          resource,
          token,
          appliedFires: claims.length,
          lastAppliedFire: latestOf(claims),
          oldestAppliedAt: oldestOf(claims.map(([, claim]) => claim)),
        };
      }),
      appliedFires: { rows: applied.length, bytes: 0, oldest: oldestOf(applied) },
      server: { defaultIsolation: 'serializable', readOnly: false, lockTimeoutMs: 0, statementTimeoutMs: 0, idleInTransactionTimeoutMs: 0, mayEndOtherRoles: true, version: 'in memory' },
    };
  }

  async function auditLog(resource?: string, limit = 20): Promise<AuditEntry[]> {
    return db.audit.filter((entry) => resource === undefined || entry.resource === resource).slice(-limit).reverse();
  }

  async function pruneAppliedFires(olderThanMs: number): Promise<number> {
    checkPruneAge(olderThanMs);
    const before = Date.now() - olderThanMs;
    let pruned = 0;
    for (const claims of db.applied.values()) {
      for (const [fireId, claim] of claims) {
        // Strictly older, as the SQL stores prune (`applied_at < now - age`).
        if (claim.appliedAt.getTime() < before) {
          claims.delete(fireId);
          pruned += 1;
        }
      }
    }
    return pruned;
  }

  return {
    kind: 'memory',
    resource: context.resource,
    async migrate() {
      const newest = Math.max(0, ...db.migrations);
      if (newest > MEMORY_MIGRATION) throw new SchemaTooNewError(INSTALLATION, newest, MEMORY_MIGRATION);
      db.migrations.add(MEMORY_MIGRATION);
    },
    write: (args, fn) => metrics.timeWrite(args.resource, () => run(args, fn)),
    highest,
    advance,
    fence,
    lastAppliedFires,
    appliedFireIds,
    async appliedOutcome(resource, fireId) {
      migrated();
      const claim = db.claims(resource).get(fireId);
      return claim === undefined ? null : { token: claim.token, outcome: claim.outcome, appliedAt: claim.appliedAt };
    },
    lowerFence,
    inspect,
    auditLog,
    pruneAppliedFires,
    async lastAppliedFire() {
      return latestOf([...db.claims(context.resource)]);
    },
  };
}

/**
 * The claim applied last by its time, of equal times the largest fire id: the SQL stores' order
 * (`ORDER BY applied_at DESC, fire_id DESC`), which believes a clock that stepped back.
 */
function latestOf(claims: ReadonlyArray<readonly [string, { readonly token: Token; readonly appliedAt: Date }]>): AppliedFire | null {
  let latest: AppliedFire | null = null;
  for (const [fireId, claim] of claims) {
    const at = claim.appliedAt.getTime();
    if (latest === null || at > latest.appliedAt.getTime() || (at === latest.appliedAt.getTime() && fireId > latest.fireId)) latest = { fireId, token: claim.token, appliedAt: claim.appliedAt };
  }
  return latest;
}

/** When the oldest of `claims` was applied, or null for none. */
function oldestOf(claims: ReadonlyArray<{ readonly appliedAt: Date }>): Date | null {
  return claims.reduce<Date | null>((min, claim) => (min === null || claim.appliedAt < min ? claim.appliedAt : min), null);
}
