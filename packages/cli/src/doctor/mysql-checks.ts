import { DEFAULT_MYSQL_TAKEOVER, type GuardInspection } from '@fenced/consumer-guard/mysql';
import { humanMs } from '../text-table.js';
import { fail, pass, warn, type CheckResult } from './check.js';

// The guard's side of MySQL/MariaDB: what `fenced doctor --mysql` checks. The applied-fires check is
// the PostgreSQL one (the record is the same).

export function mysqlMigrationsCheck(inspection: GuardInspection, installation: string): CheckResult {
  const id = 'mysql.migrations';
  const { applied, known } = inspection.migrations;
  if (applied === known) return pass(id, `${installation} on ${inspection.server.version ?? 'MySQL'}: migration ${applied} of ${known} applied.`);
  if (applied > known) {
    return fail(id, `${installation}: migration ${applied} applied, newer than this version of fenced knows (${known}). A guard of this version refuses to run on it (SCHEMA_TOO_NEW).`, 'Upgrade every service that uses the guard (and this CLI) to the version that applied it.');
  }
  return fail(id, `${installation}: ${applied === 0 ? 'not migrated' : `migration ${applied} of ${known}`}: the guard's tables and procedures are missing or old.`, 'Run guard.migrate() once at deploy (idempotent; concurrent migrators wait for each other on a named lock). Its role needs CREATE ROUTINE.');
}

/** The isolation the guarded transactions meet, and whether the server takes writes at all. */
export function mysqlIsolationCheck(inspection: GuardInspection): CheckResult {
  const id = 'mysql.isolation';
  const { defaultIsolation, readOnly } = inspection.server;
  if (readOnly) return fail(id, 'read_only is on: every guarded write fails (GUARD_UNAVAILABLE). This is a replica.', 'Point the guard at the primary.');
  return pass(
    id,
    `server default ${defaultIsolation}. The check reads the fence with a locking read (LOCK IN SHARE MODE, or FOR UPDATE to raise it), which sees the latest committed fence at every level, REPEATABLE READ included; plain reads in fn see the snapshot their first read takes, after the check.`,
  );
}

/**
 * The binary log: a guarded write commits its fence and its mutation in one transaction, so any
 * format replicates them together; STATEMENT format is flagged because it replicates what a handler
 * runs as statements, some of which it cannot replay safely.
 */
export function mysqlBinlogCheck(inspection: GuardInspection): CheckResult {
  const id = 'mysql.binlog';
  const binlog = inspection.server.binlog;
  if (binlog === undefined) return pass(id, 'the server did not report its binary log.');
  if (!binlog.enabled) {
    return warn(id, 'the binary log is off: no replica can take over with the fences, and a failover to a replica without them lets stale tokens through until the fences are raised again.', 'Run the guard on a primary with log_bin on and replicas (GTID, ROW format) if the database is meant to survive a failover.');
  }
  if (binlog.format.toUpperCase() === 'STATEMENT') {
    return warn(id, 'binlog_format STATEMENT: the fence and its write replicate together, but statement-based replication of what handlers run can diverge on replicas.', 'Use binlog_format ROW (MySQL 8 default) or MIXED.');
  }
  return pass(id, `binary log on, format ${binlog.format}: each guarded write's fence and mutation replicate in one transaction.`);
}

/** The lock waits an election's advance meets, and whether its takeover may end a frozen writer. */
export function mysqlTimeoutsCheck(inspection: GuardInspection): CheckResult {
  const id = 'mysql.timeouts';
  const { lockTimeoutMs, idleInTransactionTimeoutMs, mayEndOtherRoles } = inspection.server;
  const settings = `innodb_lock_wait_timeout ${humanMs(lockTimeoutMs)}, idle_transaction_timeout ${idleInTransactionTimeoutMs === 0 ? 'off' : humanMs(idleInTransactionTimeoutMs)}`;
  const takeover = mayEndOtherRoles
    ? 'this user may end any guarded writer that blocks an election (KILL CONNECTION)'
    : "this user may end only its own sessions: a writer connected as another user that freezes inside its transaction holds the next election off until it wakes or a timeout ends it";
  if (!mayEndOtherRoles || idleInTransactionTimeoutMs === 0) {
    return warn(
      id,
      `${settings}; ${takeover}. The takeover ends a frozen writer only when an election's advance waits on it (after ${humanMs(DEFAULT_MYSQL_TAKEOVER.graceMs)}, bounded by ${humanMs(DEFAULT_MYSQL_TAKEOVER.timeoutMs)}); a session timeout is the backstop for the rest.`,
      `Set idle_transaction_timeout (MariaDB) or wait_timeout for the writers' user above your longest pause inside a transaction${mayEndOtherRoles ? '' : ', and GRANT CONNECTION_ADMIN (MySQL 8) or SUPER to the user the coordinator connects as'}.`,
    );
  }
  return pass(id, `${settings}; ${takeover}.`);
}
