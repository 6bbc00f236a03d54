import { ConfigError, DuplicateFireError, FenceAheadError, NotLeaderError, parseResource, StaleTokenError, type Fence, type Token } from '@fenced/shared';
import { emit, storedToken } from '@fenced/shared/internal';
import type { FenceStoreContext, FenceStoreIn } from '../fence-store.js';
import { advanceWithTakeover } from '../takeover/advance-with-takeover.js';
import type { WriteArguments } from '../write-arguments.js';
import type { AppliedOutcome } from '../fence-records.js';
import type { GuardedWriteContext, TransactionExecutor } from '../write-context.js';
import { callerExecutor } from '../sql/caller-transaction.js';
import { writeUnderSavepoint } from '../sql/savepoint-write.js';
import { FenceHints } from '../sql/fence-hints.js';
import { retryBackoff as backoff } from '../internal/retry-backoff.js';
import { isKyselyLike } from '../sql/kysely.js';
import { kyselyMysqlSession } from './kysely-session.js';
import { mysqlAdminOperations } from './mysql-admin.js';
import { CheckRefusal, DUPLICATE_ENTRY, DUPLICATE_FIRE, errnoOf, FENCE_AHEAD, fenceInRefusal, isNotMigrated, isRetryable, LEASE_NOT_HELD, LOCK_DEADLOCK, SAVEPOINT_DOES_NOT_EXIST, STALE_TOKEN } from './mysql-errors.js';
import { leaseResolver } from '../sql/check-lease.js';
import type { MysqlStoreOptions } from './mysql-store-options.js';
import { mysqlTakeoverStore } from './mysql-takeover.js';
import { isMysql2PoolLike, mysql2ConnectionExecutor, mysql2Session } from './mysql2-session.js';
import { migrateMysql } from './migrator.js';
import { mysqlObjectNames } from './names.js';
import { runGuardedTransaction, type MysqlConnection, type MysqlSession } from './session.js';
import { storeUnavailable } from '../sql/store-unavailable.js';
import { runWriteAttempts, type WriteErrorRules } from '../sql/write-attempts.js';
import { mysqlStatements } from './statements.js';

/**
 * The MySQL/MariaDB fence store (fence-store.ts): the same design as PostgreSQL's. A fence row per
 * resource, checked and raised by one procedure call (migrations/000001.sql) as the first statement
 * of the write's own InnoDB transaction, under the row's exclusive lock, which the write holds until
 * it commits; the fire claim in the same call. Refusals and retries are told apart by error number.
 */
export function mysqlFenceStore(options: MysqlStoreOptions, context: FenceStoreContext): FenceStoreIn {
  const { metrics } = context;
  const logger = metrics.observing(context.logger);
  const names = mysqlObjectNames(options.database ?? null, options.table);
  const session = openSession(options.db, options.pool, (error) => emit(logger, { type: 'guard.connection-lost', resource: context.resource, error }));
  const checkSql = `CALL ${names.checkProc}(?, ?, ?, ?)`;
  const statements = mysqlStatements(names);
  const hints = new FenceHints();
  const leaseOf = leaseResolver(options.checkLease, 'mysql fences');
  const leaseCheckSql = `CALL ${names.leaseCheckProc}(?, ?, ?)`;

  const unavailable = (resource: string, phase: string, cause: unknown, outcomeUnknown = false) =>
    storeUnavailable(logger, 'MySQL', { resource, phase, cause, outcomeUnknown, notMigrated: isNotMigrated(cause) });

  /** The procedure's refusal as its typed error (reported), or undefined. */
  function refusalOf(cause: unknown, resource: string, token: Token, fireId: string | null): StaleTokenError | DuplicateFireError | NotLeaderError | undefined {
    const errno = errnoOf(cause);
    if (errno === LEASE_NOT_HELD && leaseOf !== undefined) {
      const lease = leaseOf(resource);
      const now = fenceInRefusal(cause) ?? '';
      emit(logger, { type: 'guard.lease-refused', resource, token, lease });
      return new NotLeaderError(lease, `token ${token} no longer holds lease ${JSON.stringify(lease)} (its token is ${now === '' ? 'none' : now}): the write was refused in its own transaction`);
    }
    if (errno === STALE_TOKEN) {
      const highest = storedToken(fenceInRefusal(cause) ?? '');
      hints.saw(resource, highest);
      emit(logger, { type: 'token.rejected', resource, token, highest, via: 'mysql' });
      return new StaleTokenError(resource, token, highest);
    }
    if (errno === DUPLICATE_FIRE && fireId !== null) {
      hints.saw(resource, token);
      emit(logger, { type: 'guard.duplicate', resource, token, fireId });
      return new DuplicateFireError(resource, fireId);
    }
    return undefined;
  }

  function write<T>(args: WriteArguments, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>): Promise<T> {
    return metrics.timeWrite(args.resource, () => writeWithRetries(args, fn));
  }

  async function writeWithRetries<T>(args: WriteArguments, fn: (trx: unknown, ctx: GuardedWriteContext) => Promise<T>): Promise<T> {
    const { token, resource, fireId, recordOutcome, issuer } = args;
    const check = async (connection: MysqlConnection) => {
      await checkFence(connection, token, resource, fireId);
      // Then the write's lease, held in share mode until the write ends (migrations/000003.sql).
      if (leaseOf !== undefined) await connection.run(leaseCheckSql, [leaseOf(resource), token.toString(), issuer ?? null]);
    };
    const closing =
      fireId === null || recordOutcome === undefined
        ? undefined
        : async (connection: MysqlConnection, result: T) => {
            await connection.run(statements.recordOutcome, [recordOutcome(result), resource, fireId]);
          };
    return runWriteAttempts(
      args,
      (attempt) =>
        session.withConnection((connection, trx) => runGuardedTransaction(connection, trx, options.isolationLevel, check, (t) => fn(t, { token, resource, attempt }), closing)),
      errorRules,
      options.maxRetries,
    );
  }

  const errorRules: WriteErrorRules = {
    isRetryable,
    retrying: ({ resource, token }, cause, attempt) => emit(logger, { type: 'guard.retry', resource, token, sqlstate: String(errnoOf(cause)), attempt }),
    refusalOf: ({ resource, token, fireId }, cause) => refusalOf(cause, resource, token, fireId),
    unavailable: ({ resource }, phase, cause, outcomeUnknown) => unavailable(resource, phase, cause, outcomeUnknown),
    accepted: ({ resource, token }) => {
      hints.saw(resource, token);
      emit(logger, { type: 'token.accepted', resource, token });
    },
  };

  /**
   * The check, first in the write's transaction. A write of the fence's own token takes the shared
   * path (one locking read, compared here; the fire claimed by one insert); a write that may raise
   * the fence, or finds none, calls the check procedure, which takes the row exclusively.
   */
  async function checkFence(connection: MysqlConnection, token: Token, resource: string, fireId: string | null): Promise<void> {
    if (!hints.raises(token, resource)) {
      const [row] = await connection.run(statements.readFenceShared, [resource]);
      if (row !== undefined) {
        const highest = storedToken(String(row['token']));
        if (token < highest) throw new CheckRefusal(STALE_TOKEN, highest.toString());
        if (token === highest) {
          if (fireId !== null && (await connection.affected(statements.claimFire, [resource, fireId, fireId, token.toString()])) === 0) {
            throw new CheckRefusal(DUPLICATE_FIRE, 'fire already applied');
          }
          return;
        }
      }
    }
    await connection.run(checkSql, [resource, token.toString(), true, fireId]);
  }

  function writeIn<T>(callerTx: TransactionExecutor, args: WriteArguments, fn: (tx: TransactionExecutor, ctx: GuardedWriteContext) => Promise<T>): Promise<T> {
    const tx = callerExecutor(callerTx, 'MySQL', mysql2ConnectionExecutor, isMysql2PoolLike);
    const { token, resource, fireId, issuer, recordOutcome } = args;
    return metrics.timeWrite(resource, async () => {
      // fn gets the transaction as the caller handed it (their mysql2 connection, their Kysely trx).
      // The savepoint also matters for the check itself: the procedure's statements are not one
      // statement to InnoDB, so a claim refused after a raise would otherwise leave the raise behind.
      const result = await writeUnderSavepoint(
        tx,
        {
          async opened(tx, savepoint) {
            // Outside a transaction MySQL accepts a savepoint and forgets it at once (autocommit): going
            // back to it proves the caller's transaction is open before anything of ours is written.
            await tx.executeSql(`ROLLBACK TO SAVEPOINT ${savepoint}`).catch((err: unknown) => {
              if (errnoOf(err) !== SAVEPOINT_DOES_NOT_EXIST) throw err;
              throw new TypeError("guardedWriteIn: tx is not in a transaction (start one first: START TRANSACTION, or conn.beginTransaction()); the guard never opens or commits the caller's");
            });
          },
          async check(tx) {
            await tx.executeSql(checkSql, [resource, token.toString(), hints.raises(token, resource), fireId]);
            if (leaseOf !== undefined) await tx.executeSql(leaseCheckSql, [leaseOf(resource), token.toString(), issuer ?? null]);
          },
          ...(fireId === null || recordOutcome === undefined
            ? {}
            : { recordOutcome: async (tx: TransactionExecutor, result: T) => void (await tx.executeSql(statements.recordOutcome, [recordOutcome(result), resource, fireId])) }),
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

  async function highest(resource: string): Promise<Token | null> {
    try {
      const rows = await session.query(`SELECT CAST(token AS CHAR) AS token FROM ${names.fences} WHERE resource = ?`, [resource]);
      const token = rows[0]?.['token'];
      return typeof token === 'string' ? storedToken(token) : null;
    } catch (err) {
      throw unavailable(resource, 'query', err);
    }
  }

  const takeoverStore = mysqlTakeoverStore(session as MysqlSession<unknown>, names);

  /** The strict advance, retried when two first advances of a resource meet, taking over from frozen writers. */
  async function advance(resource: string, token: Token): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await advanceWithTakeover(takeoverStore, resource, token, options.takeover, (blocker) =>
          emit(logger, { type: 'guard.takeover', resource, token, blockingToken: blocker.token, session: blocker.session, ended: blocker.ended }),
        );
        break;
      } catch (err) {
        if (errnoOf(err) === FENCE_AHEAD) throw new FenceAheadError(resource, token, storedToken(fenceInRefusal(err) ?? ''));
        // Two first advances of a resource meet as a deadlock (REPEATABLE READ) or a duplicate key
        // (READ COMMITTED): the loser runs again. A lock wait that timed out is the takeover's bound
        // on the whole wait: run again, the advance would wait that long once more, maxRetries times.
        if ((errnoOf(err) === DUPLICATE_ENTRY || errnoOf(err) === LOCK_DEADLOCK) && attempt <= options.maxRetries) {
          await backoff(attempt);
          continue;
        }
        throw unavailable(resource, 'advance', err);
      }
    }
    hints.saw(resource, token);
    emit(logger, { type: 'fence.advanced', resource, token });
  }

  const admin = mysqlAdminOperations({ session: session as MysqlSession<unknown>, names, defaultResource: context.resource, logger, fail: unavailable, onLowered: (resource, token) => hints.saw(resource, token) });

  async function appliedOutcome(resource: string, fireId: string): Promise<AppliedOutcome | null> {
    let rows: Record<string, unknown>[];
    try {
      rows = await session.query(statements.readOutcome, [resource, fireId]);
    } catch (err) {
      throw unavailable(resource, 'read applied fires', err);
    }
    const row = rows[0];
    if (row === undefined) return null;
    const outcome = row['outcome'];
    return {
      token: storedToken(String(row['token'])),
      outcome: outcome === null || outcome === undefined ? null : Buffer.isBuffer(outcome) ? outcome.toString('utf8') : String(outcome),
      appliedAt: new Date(row['applied_at'] as string | Date),
    };
  }

  const fence = (resource: string): Fence => {
    const name = parseResource(resource);
    return Object.freeze({
      resource: name,
      highest: () => highest(name),
      advance: (token: Token) => advance(name, token),
      lastAppliedFires: (since: Date) => admin.lastAppliedFires(name, since),
      appliedFireIds: (fireIds: readonly string[]) => admin.appliedFireIds(name, fireIds),
    });
  };

  return Object.freeze({
    kind: 'mysql' as const,
    resource: context.resource,
    migrate: () => migrateMysql(session as MysqlSession<unknown>, names, logger),
    write,
    writeIn,
    highest,
    advance,
    fence,
    lowerFence: admin.lowerFence,
    inspect: admin.inspect,
    auditLog: admin.auditLog,
    pruneAppliedFires: admin.pruneAppliedFires,
    lastAppliedFire: admin.lastAppliedFire,
    lastAppliedFires: admin.lastAppliedFires,
    appliedFireIds: admin.appliedFireIds,
    appliedOutcome,
  });
}

function openSession(db: object, pool: object | undefined, onConnectionError: (err: Error) => void): MysqlSession<unknown> {
  if (isKyselyLike(db)) {
    if (pool === undefined) {
      throw new ConfigError('mysql fences', [
        { path: 'pool', message: "required when db is a Kysely instance: pass the mysql2 pool given to its MysqlDialect, so the store can hear a killed connection's error" },
      ]);
    }
    return kyselyMysqlSession(db, pool, onConnectionError) as MysqlSession<unknown>;
  }
  if (isMysql2PoolLike(db)) return mysql2Session(db, onConnectionError) as MysqlSession<unknown>;
  throw new ConfigError('mysql fences', [{ path: 'db', message: "must be a mysql2 promise pool (require('mysql2/promise').createPool) or a Kysely instance over MysqlDialect" }]);
}

