import { ConfigError, DuplicateFireError, FenceAheadError, NotLeaderError, parseResource, StaleTokenError, type Fence, type Token } from '@fenced/shared';
import { emit, storedToken } from '@fenced/shared/internal';
import type { PostgresStoreOptions } from './postgres-guard-options.js';
import type { BatchFire, BatchVerdict, FenceStoreContext, FenceStoreIn } from '../fence-store.js';
import { isKyselyLike } from '../sql/kysely.js';
import { kyselySession } from './kysely-session.js';
import { adminOperations } from './postgres-admin.js';
import { inspectionOperations } from './inspection.js';
import { storeUnavailable } from '../sql/store-unavailable.js';
import { runWriteAttempts, type WriteErrorRules } from '../sql/write-attempts.js';
import { migrate } from './migrator.js';
import { leaseResolver } from '../sql/check-lease.js';
import { FenceHints } from '../sql/fence-hints.js';
import { guardObjectNames } from './names.js';
import { isPgPoolLike, pgClientExecutor, isPgPool, pgPoolSession } from './pg-pool-session.js';
import { callerExecutor } from '../sql/caller-transaction.js';
import { writeUnderSavepoint } from '../sql/savepoint-write.js';
import { checkCall, leaseCheckedCall } from './check-call.js';
import { postgresTakeoverStore } from './postgres-takeover.js';
import { advanceWithTakeover } from '../takeover/advance-with-takeover.js';
import { toParams, type GuardSession } from './session.js';
import { detailOf, DUPLICATE_FIRE, FENCE_AHEAD, isNotMigrated, isRetryable, LEASE_NOT_HELD, sqlStateOf, STALE_TOKEN } from './postgres-errors.js';
import type { WriteArguments } from '../write-arguments.js';
import type { AppliedOutcome } from '../fence-records.js';
import { quoteLiteral } from './sql-text.js';
import type { GuardedWriteContext, TransactionExecutor } from '../write-context.js';

/**
 * The PostgreSQL fence store (fence-store.ts) on parsed options, recording into the guard's metrics:
 * the combined guard builds it with its own instruments, so nothing is counted twice.
 */
export function postgresFenceStore(options: PostgresStoreOptions, context: FenceStoreContext): FenceStoreIn {
  const { metrics } = context;
  const logger = metrics.observing(context.logger);
  const names = guardObjectNames(options.schema, options.table);
  const session = openSession(options.db, options.pool, (error) => emit(logger, { type: 'guard.connection-lost', resource: context.resource, error }));

  const unavailable = (resource: string, phase: string, cause: unknown, outcomeUnknown = false) =>
    storeUnavailable(logger, 'PostgreSQL', { resource, phase, cause, outcomeUnknown, notMigrated: isNotMigrated(cause) });
  const leaseOf = leaseResolver(options.checkLease, 'postgres guard');
  const check = leaseOf === undefined ? checkCall(names.checkFn) : leaseCheckedCall(names.checkedFn, leaseOf);
  const hints = new FenceHints();

  /** The check's refusal as its typed error (reported, and the fence it named remembered), or undefined. */
  function refusalOf(cause: unknown, resource: string, token: Token, fireId: string | null): StaleTokenError | DuplicateFireError | NotLeaderError | undefined {
    if (sqlStateOf(cause) === LEASE_NOT_HELD && leaseOf !== undefined) {
      const lease = leaseOf(resource);
      const now = detailOf(cause) ?? '';
      emit(logger, { type: 'guard.lease-refused', resource, token, lease });
      return new NotLeaderError(lease, `token ${token} no longer holds lease ${JSON.stringify(lease)} (its token is ${now === '' ? 'none' : now}): the write was refused in its own transaction`);
    }
    if (sqlStateOf(cause) === STALE_TOKEN) {
      const highest = storedToken(detailOf(cause) ?? '');
      hints.saw(resource, highest);
      emit(logger, { type: 'token.rejected', resource, token, highest, via: 'postgres' });
      return new StaleTokenError(resource, token, highest);
    }
    if (sqlStateOf(cause) === DUPLICATE_FIRE && fireId !== null) {
      hints.saw(resource, token);
      emit(logger, { type: 'guard.duplicate', resource, token, fireId });
      return new DuplicateFireError(resource, fireId);
    }
    return undefined;
  }

  function write<T>(args: WriteArguments, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>): Promise<T> {
    return metrics.timeWrite(args.resource, () => writeWithRetries(args, fn));
  }

  /** The statement that records a fire's outcome beside its claim, values inlined; or undefined. */
  function outcomeRecorder<T>({ resource, fireId, recordOutcome }: WriteArguments): ((result: T) => string) | undefined {
    if (fireId === null || recordOutcome === undefined) return undefined;
    // The outcome is JSON-like text made by our own layer; quoteLiteral refuses what text cannot hold.
    return (result) => `UPDATE ${names.applied} SET outcome = ${quoteLiteral(recordOutcome(result))} WHERE resource = ${quoteLiteral(resource)} AND fire_id = ${quoteLiteral(fireId)}`;
  }

  async function writeWithRetries<T>(args: WriteArguments, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>): Promise<T> {
    const { token, resource, fireId, issuer } = args;
    const closing = outcomeRecorder<T>(args);
    return runWriteAttempts(
      args,
      (attempt) => session.transaction(options.isolationLevel, check.inline(token, resource, hints.raises(token, resource), fireId, issuer), (trx) => fn(trx, { token, resource, attempt }), closing),
      errorRules,
      options.maxRetries,
    );
  }

  const errorRules: WriteErrorRules = {
    isRetryable,
    retrying: ({ resource, token }, cause, attempt) => emit(logger, { type: 'guard.retry', resource, token, sqlstate: sqlStateOf(cause) ?? '', attempt }),
    refusalOf: ({ resource, token, fireId }, cause) => refusalOf(cause, resource, token, fireId),
    unavailable: ({ resource }, phase, cause, outcomeUnknown) => unavailable(resource, phase, cause, outcomeUnknown),
    accepted: ({ resource, token }) => {
      hints.saw(resource, token);
      emit(logger, { type: 'token.accepted', resource, token });
    },
  };

  function writeIn<T>(callerTx: TransactionExecutor, args: WriteArguments, fn: (tx: TransactionExecutor, ctx: GuardedWriteContext) => Promise<T>): Promise<T> {
    const tx = callerExecutor(callerTx, 'PostgreSQL', pgClientExecutor, isPgPool);
    const { token, resource, fireId, issuer, recordOutcome } = args;
    return metrics.timeWrite(resource, async () => {
      // fn gets the transaction as the caller handed it (their Kysely trx, their client).
      const result = await writeUnderSavepoint(
        tx,
        {
          async check(tx) {
            const statement = check.statement(token, resource, hints.raises(token, resource), fireId, issuer);
            await tx.executeSql(statement.text, toParams(statement.values));
          },
          ...(fireId === null || recordOutcome === undefined
            ? {}
            : {
                recordOutcome: async (tx: TransactionExecutor, result: T) =>
                  void (await tx.executeSql(`UPDATE ${names.applied} SET outcome = $3 WHERE resource = $1 AND fire_id = $2`, [resource, fireId, recordOutcome(result)])),
              }),
          refusalOf: (cause) => refusalOf(cause, resource, token, fireId),
          unavailable: (phase, cause) => unavailable(resource, phase, cause),
        },
        () => fn(callerTx, { token, resource, attempt: 1 }),
      );
      hints.saw(resource, token);
      emit(logger, { type: 'token.accepted', resource, token });
      return result;
    });
  }

  const checkBatchText = `SELECT verdict, fence::text AS fence FROM ${names.checkBatchFn}($1::text, $2::bigint[], $3::text[]) ORDER BY ord`;

  /**
   * The batch check (migrations/000007.sql): one statement, a verdict per fire. A database error
   * leaves the caller's transaction aborted (there is no savepoint to go back to): it fails the whole
   * batch, as it would have on its own.
   */
  async function checkBatchIn(tx: TransactionExecutor, resource: string, fires: readonly BatchFire[]): Promise<BatchVerdict[]> {
    if (typeof tx?.executeSql !== 'function') throw new TypeError('checkBatchIn: tx must have executeSql(text, values)');
    let rows: unknown[];
    try {
      ({ rows } = await tx.executeSql(checkBatchText, [resource, fires.map((f) => f.token.toString()), fires.map((f) => f.fireId)]));
    } catch (err) {
      throw unavailable(resource, 'open', err);
    }
    if (rows.length !== fires.length) throw unavailable(resource, 'open', new Error(`the batch check answered ${rows.length} verdicts for ${fires.length} fires`));
    return rows.map((row, i) => {
      const { verdict, fence } = row as { verdict: BatchVerdict['verdict']; fence: string };
      const { token, fireId } = fires[i]!;
      const judged = storedToken(fence);
      if (verdict === 'stale') emit(logger, { type: 'token.rejected', resource, token, highest: judged, via: 'postgres' });
      else if (verdict === 'duplicate') emit(logger, { type: 'guard.duplicate', resource, token, fireId });
      else emit(logger, { type: 'token.accepted', resource, token });
      return { verdict, fence: judged };
    });
  }

  async function highest(resource: string): Promise<Token | null> {
    try {
      const rows = await session.query({ text: `SELECT token::text AS token FROM ${names.fences} WHERE resource = $1`, values: [resource] });
      const token = rows[0]?.['token'];
      return typeof token === 'string' ? storedToken(token) : null;
    } catch (err) {
      throw unavailable(resource, 'query', err);
    }
  }

  const takeoverStore = postgresTakeoverStore(session, names);

  /**
   * The strict advance, taking over from transactions of lower tokens that block it past the grace
   * period (advance-with-takeover.ts): a leader frozen inside its transaction cannot hold off the
   * next term.
   */
  async function advance(resource: string, token: Token): Promise<void> {
    try {
      await advanceWithTakeover(takeoverStore, resource, token, options.takeover, (blocker) =>
        emit(logger, { type: 'guard.takeover', resource, token, blockingToken: blocker.token, session: blocker.session, ended: blocker.ended }),
      );
    } catch (err) {
      if (sqlStateOf(err) === FENCE_AHEAD) throw new FenceAheadError(resource, token, storedToken(detailOf(err) ?? ''));
      throw unavailable(resource, 'advance', err);
    }
    emit(logger, { type: 'fence.advanced', resource, token });
  }

  const { lowerFence, pruneAppliedFires, lastAppliedFire, lastAppliedFires, appliedFireIds } = adminOperations({
    session,
    names,
    defaultResource: context.resource,
    fail: unavailable,
    logger,
    onLowered: (resource, token) => hints.saw(resource, token),
  });

  const { inspect, auditLog } = inspectionOperations({
    session,
    names,
    defaultResource: context.resource,
    fail: unavailable,
    logger,
  });

  async function appliedOutcome(resource: string, fireId: string): Promise<AppliedOutcome | null> {
    let rows: Record<string, unknown>[];
    try {
      rows = await session.query({ text: `SELECT token::text AS token, outcome, applied_at FROM ${names.applied} WHERE resource = $1 AND fire_id = $2`, values: [resource, fireId] });
    } catch (err) {
      throw unavailable(resource, 'read applied fires', err);
    }
    const row = rows[0];
    if (row === undefined) return null;
    return { token: storedToken(String(row['token'])), outcome: typeof row['outcome'] === 'string' ? row['outcome'] : null, appliedAt: new Date(row['applied_at'] as string | Date) };
  }

  const fence = (resource: string): Fence => {
    const name = parseResource(resource);
    return Object.freeze({
      resource: name,
      highest: () => highest(name),
      advance: (token: Token) => advance(name, token),
      lastAppliedFires: (since: Date) => lastAppliedFires(name, since),
      appliedFireIds: (fireIds: readonly string[]) => appliedFireIds(name, fireIds),
    });
  };

  return Object.freeze({
    kind: 'postgres' as const,
    resource: context.resource,
    migrate: () => migrate(session, names, logger),
    write,
    writeIn,
    // The batch path checks no lease: lease-checked writes go one by one.
    ...(leaseOf === undefined ? { checkBatchIn } : {}),
    highest,
    advance,
    fence,
    lowerFence,
    inspect,
    auditLog,
    pruneAppliedFires,
    lastAppliedFire,
    lastAppliedFires,
    appliedFireIds,
    appliedOutcome,
  });
}

function openSession(db: object, pool: object | undefined, onConnectionError: (err: Error) => void): GuardSession<unknown> {
  if (isKyselyLike(db)) {
    if (pool === undefined) {
      throw new ConfigError('postgres guard', [
        { path: 'pool', message: "required when db is a Kysely instance: pass the pg.Pool behind its PostgresDialect, so the guard can hear a killed connection's error (unheard, it kills the process)" },
      ]);
    }
    return kyselySession(db, pool, onConnectionError) as GuardSession<unknown>;
  }
  if (isPgPoolLike(db)) return pgPoolSession(db, onConnectionError) as GuardSession<unknown>;
  throw new ConfigError('postgres guard', [{ path: 'db', message: 'must be a Kysely instance or a pg.Pool' }]);
}

