import { ConfigError, parseFireId, parseResource, parseToken, type Token, type TokenInput } from '@fenced/shared';
import { storedToken } from '@fenced/shared/internal';

// The records every fence store reads and writes outside the write path, in a module of their own:
// each store's admin and inspection operations return them, the guards above the store seam pass
// them on, and the CLI reads them, whatever database holds the fences.

/** A fire recorded in the applied-fires table. */
export interface AppliedFire {
  readonly fireId: string;
  readonly token: Token;
  readonly appliedAt: Date;
}

/**
 * What a fire's first write recorded beside its claim, for callers that repeat a request and must get
 * the first answer back (an HTTP service's reply to a retried call): written in the write's own
 * transaction, so a fire that was applied has its outcome, and one that was not has neither.
 */
export interface AppliedOutcome {
  /** The token the fire was applied with. */
  readonly token: Token;
  /** The text the write recorded, or null when the fire was applied by a write that recorded none. */
  readonly outcome: string | null;
  readonly appliedAt: Date;
}

/** An explicit, audited lowering of a fence: recovery from a poisoned fence, never automatic. */
export interface LowerFenceRequest {
  readonly resource?: string;
  /** The new fence. */
  readonly token: TokenInput;
  /** Who does this (recorded in the audit table). */
  readonly actor: string;
  /** Why (recorded in the audit table). */
  readonly reason: string;
}

/** A lowering request once validated: the token parsed, who and why present. */
export interface ParsedLowerFenceRequest {
  readonly resource: string;
  readonly token: Token;
  readonly actor: string;
  readonly reason: string;
}

/**
 * The edge of `lowerFence`: the request validated (token parsed once, actor and reason required)
 * before anything is sent.
 */
export function parseLowerFenceRequest(request: LowerFenceRequest, defaultResource: string): ParsedLowerFenceRequest {
  const resource = request.resource === undefined ? defaultResource : parseResource(request.resource);
  const token = parseToken(request.token);
  for (const [field, value] of [['actor', request.actor], ['reason', request.reason]] as const) {
    if (typeof value !== 'string' || value.trim().length === 0) throw new ConfigError('lowerFence', [{ path: field, message: 'is required: a lowered fence is an audited act' }]);
  }
  return { resource, token, actor: request.actor, reason: request.reason };
}

/** One resource's fence and its record of applied fires. */
export interface FenceReport {
  readonly resource: string;
  readonly token: Token;
  readonly appliedFires: number;
  readonly lastAppliedFire: AppliedFire | null;
  readonly oldestAppliedAt: Date | null;
}

/** One deliberate lowering of a fence, from the audit table. */
export interface AuditEntry {
  readonly resource: string;
  readonly from: Token | null;
  readonly to: Token;
  readonly actor: string;
  readonly reason: string;
  readonly at: Date;
}

/** What an operator (or `fenced status` and `fenced doctor`) reads about an installation. */
export interface GuardInspection {
  /** The database that holds the fences: its store's kind (`FenceStoreKind`, `'postgres'`, `'mysql'`, ...). */
  readonly store: string;
  /** The newest migration applied here, and the newest this version of the guard knows. */
  readonly migrations: { readonly applied: number; readonly known: number };
  /** Every fence of the installation, with its applied-fire record (empty before `migrate()`). */
  readonly fences: readonly FenceReport[];
  /** The applied-fires table as a whole: rows, bytes on disk (indexes included), oldest record. */
  readonly appliedFires: { readonly rows: number; readonly bytes: number; readonly oldest: Date | null };
  /**
   * The session defaults the guard meets: the default isolation level, whether sessions are
   * read-only, the timeouts in milliseconds (0: off; on MySQL `lockTimeoutMs` is
   * `innodb_lock_wait_timeout`, `statementTimeoutMs` MariaDB's `max_statement_time` or MySQL's
   * `max_execution_time`, `idleInTransactionTimeoutMs` MariaDB's `idle_transaction_timeout`), and
   * whether this role may end other roles' sessions (PostgreSQL: a superuser or a member of
   * `pg_signal_backend`; MySQL: `CONNECTION ADMIN` or `SUPER`), which the election-time takeover
   * needs when writers connect as another role.
   */
  readonly server: {
    readonly defaultIsolation: string;
    readonly readOnly: boolean;
    readonly lockTimeoutMs: number;
    readonly statementTimeoutMs: number;
    readonly idleInTransactionTimeoutMs: number;
    readonly mayEndOtherRoles: boolean;
    /** The server's product and version (`PostgreSQL 15.19`, `MariaDB 10.11.19`, `MySQL 8.0.40`). */
    readonly version?: string;
    /**
     * MySQL and MariaDB: the binary log (on or off) and its format. A guarded write commits the fence
     * and the mutation in one transaction, so any format replicates them together; `STATEMENT`
     * format is reported because it cannot replicate every statement a handler might run safely.
     */
    readonly binlog?: { readonly enabled: boolean; readonly format: string };
  };
}

/**
 * Each job's latest fire, from the largest fire id per job a store read (within a job the largest id
 * is the latest fire): job name to its scheduled time. Ids that are not a scheduler's fire are left out.
 */
export function latestFireByJob(fireIds: Iterable<string>): ReadonlyMap<string, number> {
  const latest = new Map<string, number>();
  for (const id of fireIds) {
    const fire = parseFireId(id);
    if (fire !== null) latest.set(fire.job, fire.scheduledAt);
  }
  return latest;
}

/** An audit row as a SQL store reads it (tokens as decimal text, from_token null for a first fence), its time read by the store. */
export function auditEntryOf(row: Readonly<Record<string, unknown>>, at: Date): AuditEntry {
  return {
    resource: String(row['resource']),
    from: row['from_token'] === null ? null : storedToken(String(row['from_token'])),
    to: storedToken(String(row['to_token'])),
    actor: String(row['actor']),
    reason: String(row['reason']),
    at,
  };
}

/** Refuses an age for `pruneAppliedFires` that is not a whole, non-negative number of milliseconds. */
export function checkPruneAge(olderThanMs: number): void {
  if (!Number.isInteger(olderThanMs) || olderThanMs < 0) throw new ConfigError('pruneAppliedFires', [{ path: 'olderThanMs', message: 'must be a non-negative integer' }]);
}
