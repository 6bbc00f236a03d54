import { DEFAULT_TAKEOVER, type GuardInspection } from '@fenced/consumer-guard/postgres';
import { humanMs } from '../text-table.js';
import { fail, pass, warn, type CheckResult } from './check.js';

export function migrationsCheck(inspection: GuardInspection, installation: string): CheckResult {
  const id = 'postgres.migrations';
  const { applied, known } = inspection.migrations;
  if (applied === known) return pass(id, `${installation}: migration ${applied} of ${known} applied.`);
  if (applied > known) {
    return fail(id, `${installation}: migration ${applied} applied, newer than this version of fenced knows (${known}). A guard of this version refuses to run on it (SCHEMA_TOO_NEW).`, 'Upgrade every service that uses the guard (and this CLI) to the version that applied it.');
  }
  return fail(id, `${installation}: ${applied === 0 ? 'not migrated' : `migration ${applied} of ${known}`}: the guard's objects are missing or old.`, 'Run guard.migrate() once at deploy (it is idempotent and safe to race).');
}

export function isolationCheck(inspection: GuardInspection): CheckResult {
  const id = 'postgres.isolation';
  const { defaultIsolation, readOnly } = inspection.server;
  if (readOnly) return fail(id, 'default_transaction_read_only is on: every guarded write fails (GUARD_UNAVAILABLE).', 'Point the guard at the primary, or turn default_transaction_read_only off for its role.');
  return pass(
    id,
    `server default ${defaultIsolation}. The guard sets its own level on each transaction (the isolationLevel option, read committed by default): the fence check locks the fence row, which holds at every level, and serialization failures are retried.`,
  );
}

/**
 * The timeouts a frozen or killed writer meets, and the right the election-time takeover needs
 * (docs/fencing-model.md, "A leader frozen inside its transaction").
 */
export function timeoutsCheck(inspection: GuardInspection): CheckResult {
  const id = 'postgres.timeouts';
  const { lockTimeoutMs, statementTimeoutMs, idleInTransactionTimeoutMs, mayEndOtherRoles } = inspection.server;
  const ms = (v: number) => (v === 0 ? 'off' : humanMs(v));
  const settings = `lock_timeout ${ms(lockTimeoutMs)}, statement_timeout ${ms(statementTimeoutMs)}, idle_in_transaction_session_timeout ${ms(idleInTransactionTimeoutMs)}`;
  const takeover = mayEndOtherRoles
    ? 'this role may end any guarded writer that blocks an election'
    : "this role may end only its own role's backends: a writer connected as another role that freezes inside its transaction holds the next election off until it wakes or a timeout ends it";
  if (statementTimeoutMs > 0 && statementTimeoutMs < DEFAULT_TAKEOVER.timeoutMs) {
    return warn(
      id,
      `${settings}; ${takeover}. A statement_timeout under the takeover's ${humanMs(DEFAULT_TAKEOVER.timeoutMs)} bound ends an election's advance early when a lock is held (the election fails closed and is tried again).`,
      'Raise statement_timeout for the guard role, or lower the guard option takeover.timeoutMs below it.',
    );
  }
  if (idleInTransactionTimeoutMs === 0 || !mayEndOtherRoles) {
    return warn(
      id,
      `${settings}; ${takeover}. The takeover ends a frozen writer's transaction only when an election's advance waits on it; idle_in_transaction_session_timeout is the backstop for the rest (a guarded write on a fence no coordinator advances, a writer of another role).`,
      `Set idle_in_transaction_session_timeout for the writers' role (ALTER ROLE … SET idle_in_transaction_session_timeout = '60s'; above your longest pause between two statements of one transaction)${mayEndOtherRoles ? '' : ', and GRANT pg_signal_backend TO the role the coordinator connects as when writers use another role'}.`,
    );
  }
  return pass(id, `${settings}; ${takeover}.`);
}

export function appliedFiresCheck(inspection: GuardInspection, retentionMs: number, now: number): CheckResult {
  const id = 'postgres.applied-fires';
  const { rows, bytes, oldest } = inspection.appliedFires;
  const size = `${rows} row(s), ${(bytes / 1024 / 1024).toFixed(1)} MiB with indexes`;
  if (oldest === null) return pass(id, `the applied-fires table is empty (${size}).`);
  const age = now - oldest.getTime();
  // Pruning runs on a schedule: allow one more half-period before calling it overdue.
  if (age > retentionMs * 1.5) {
    return warn(
      id,
      `${size}; the oldest record is ${humanMs(age)} old, past the retention of ${humanMs(retentionMs)}: nothing prunes it, so the table and its index only grow.`,
      `fenced fires prune --older-than ${Math.round(retentionMs / 86_400_000)}d, and schedule guard.pruneAppliedFires() (for example as a fenced job). Keep the retention longer than the scheduler's catch-up window.`,
    );
  }
  return pass(id, `${size}; the oldest record is ${humanMs(age)} old (retention ${humanMs(retentionMs)}).`);
}
