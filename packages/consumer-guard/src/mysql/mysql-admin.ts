import { parseResource, type Token } from '@fenced/shared';
import { storedToken } from '@fenced/shared/internal';
import { auditEntryOf, checkPruneAge, latestFireByJob, type AppliedFire, type AuditEntry, type GuardInspection, type ParsedLowerFenceRequest } from '../fence-records.js';
import { LATEST_MYSQL_MIGRATION } from './migrator.js';
import type { MysqlObjectNames } from './names.js';
import type { MysqlSession, Row } from './session.js';
import { reportLowered, type SqlAdminContext } from '../sql/admin-context.js';

/** What the admin and inspection operations need from the store that owns them. */
export type MysqlAdminContext = SqlAdminContext<MysqlSession<unknown>, MysqlObjectNames>;

// Times travel as epoch milliseconds computed by the server, so neither the session's time zone nor
// the driver's date parsing can shift them.
// Truncated to the millisecond, as node-postgres reads a timestamp: a time read back is never after
// the record it dates (a read `since` that time finds it).
const epochMs = (column: string) => `CAST(FLOOR(UNIX_TIMESTAMP(${column}) * 1000) AS CHAR)`;
/** Fire ids per query of `appliedFireIds`: well under the server's placeholder and packet limits. */
const APPLIED_IDS_PER_QUERY = 500;
const dateOf = (value: unknown): Date | null => (value === null || value === undefined ? null : new Date(Number(value)));

/** The MySQL store's operations outside the write path; none of them is on a write's hot path. */
export function mysqlAdminOperations(ctx: MysqlAdminContext) {
  async function lowerFence(request: ParsedLowerFenceRequest): Promise<Token | null> {
    const { resource, token } = request;
    let rows: Row[];
    try {
      rows = await ctx.session.query(`CALL ${ctx.names.lowerProc}(?, ?, ?, ?)`, [resource, token.toString(), request.actor, request.reason]);
    } catch (err) {
      throw ctx.fail(resource, 'lower fence', err);
    }
    // A CALL answers its result sets first, then its status.
    const first = Array.isArray(rows[0]) ? (rows[0] as Row[])[0] : rows[0];
    return reportLowered(ctx, request, typeof first?.['previous'] === 'string' ? storedToken(first['previous']) : null);
  }

  async function pruneAppliedFires(olderThanMs: number): Promise<number> {
    checkPruneAge(olderThanMs);
    try {
      return await ctx.session.update(`DELETE FROM ${ctx.names.applied} WHERE applied_at < NOW(6) - INTERVAL ? MICROSECOND`, [olderThanMs * 1000]);
    } catch (err) {
      throw ctx.fail(ctx.defaultResource, 'prune applied fires', err);
    }
  }

  async function lastAppliedFire(): Promise<AppliedFire | null> {
    let rows: Row[];
    try {
      rows = await ctx.session.query(
        `SELECT CONVERT(fire_id USING utf8mb4) AS fire_id, CAST(token AS CHAR) AS token, ${epochMs('applied_at')} AS applied_at FROM ${ctx.names.applied}
          WHERE resource = ? ORDER BY applied_at DESC, fire_id DESC LIMIT 1`,
        [ctx.defaultResource],
      );
    } catch (err) {
      throw ctx.fail(ctx.defaultResource, 'read applied fires', err);
    }
    const row = rows[0];
    if (row === undefined) return null;
    return { fireId: String(row['fire_id']), token: storedToken(String(row['token'])), appliedAt: dateOf(row['applied_at'])! };
  }

  /**
   * Per job, the latest scheduled fire applied to `resource` since `since`, in one query. Scheduler
   * fire ids are `<job>@<fixed-width UTC time>`, and the column's binary collation orders bytes, so
   * within a job the largest id is the latest fire.
   */
  async function lastAppliedFires(resource: string, since: Date): Promise<ReadonlyMap<string, number>> {
    let rows: Row[];
    try {
      rows = await ctx.session.query(
        `SELECT CONVERT(MAX(fire_id) USING utf8mb4) AS fire_id FROM ${ctx.names.applied}
          WHERE resource = ? AND applied_at >= FROM_UNIXTIME(? / 1000) AND LOCATE('@', fire_id) > 1
          GROUP BY SUBSTRING_INDEX(fire_id, '@', 1)`,
        [resource, since.getTime()],
      );
    } catch (err) {
      throw ctx.fail(resource, 'read applied fires', err);
    }
    return latestFireByJob(rows.map((row) => String(row['fire_id'])));
  }

  /**
   * Which of `fireIds` have a claim on `resource`, on the table's primary key, a few hundred ids per
   * query (each is a placeholder of an IN list).
   */
  async function appliedFireIds(resource: string, fireIds: readonly string[]): Promise<ReadonlySet<string>> {
    const applied = new Set<string>();
    for (let from = 0; from < fireIds.length; from += APPLIED_IDS_PER_QUERY) {
      const chunk = fireIds.slice(from, from + APPLIED_IDS_PER_QUERY);
      let rows: Row[];
      try {
        rows = await ctx.session.query(
          `SELECT CONVERT(fire_id USING utf8mb4) AS fire_id FROM ${ctx.names.applied} WHERE resource = ? AND fire_id IN (${chunk.map(() => '?').join(', ')})`,
          [resource, ...chunk],
        );
      } catch (err) {
        throw ctx.fail(resource, 'read applied fires', err);
      }
      for (const row of rows) applied.add(String(row['fire_id']));
    }
    return applied;
  }

  async function inspect(): Promise<GuardInspection> {
    try {
      const [state] = await ctx.session.query(
        `SELECT VERSION() AS version, @@version_comment AS comment, @@global.read_only AS read_only, @@innodb_lock_wait_timeout AS lock_wait,
                @@log_bin AS log_bin, @@binlog_format AS binlog_format`,
      );
      const version = String(state!['version']);
      const mariadb = /mariadb/i.test(version) || /mariadb/i.test(String(state!['comment']));
      const server = {
        version: `${mariadb ? 'MariaDB' : 'MySQL'} ${version.replace(/-.*$/, '')}`,
        defaultIsolation: await defaultIsolation(ctx.session),
        readOnly: Number(state!['read_only']) === 1,
        lockTimeoutMs: Number(state!['lock_wait']) * 1000,
        statementTimeoutMs: await statementTimeoutMs(ctx.session, mariadb),
        idleInTransactionTimeoutMs: mariadb ? await variableMs(ctx.session, 'idle_transaction_timeout', 1000) : 0,
        mayEndOtherRoles: await mayEndOthers(ctx.session),
        binlog: { enabled: Number(state!['log_bin']) === 1, format: String(state!['binlog_format']) },
      };
      // The store's database, else the connection's current one (none: no table is found, and the
      // store reads as never migrated).
      const schema = 'COALESCE(?, DATABASE())';
      const tables = await ctx.session.query(`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = ${schema}`, [ctx.names.database]);
      const present = new Set(tables.map((row) => String(row['name'])));
      const applied = present.has(`${ctx.names.table}_migrations`) ? Number((await ctx.session.query(`SELECT COALESCE(MAX(id), 0) AS id FROM ${ctx.names.migrations}`))[0]!['id']) : 0;
      const migrations = { applied, known: LATEST_MYSQL_MIGRATION };
      if (!present.has(`${ctx.names.table}_applied`)) return { store: 'mysql', migrations, fences: [], appliedFires: { rows: 0, bytes: 0, oldest: null }, server };
      const fenceRows = await ctx.session.query(
        `SELECT CONVERT(f.resource USING utf8mb4) AS resource, f.resource AS resource_bytes, CAST(f.token AS CHAR) AS token,
                (SELECT COUNT(*) FROM ${ctx.names.applied} a WHERE a.resource = f.resource) AS n,
                (SELECT ${epochMs('MIN(a.applied_at)')} FROM ${ctx.names.applied} a WHERE a.resource = f.resource) AS oldest
           FROM ${ctx.names.fences} f ORDER BY f.resource`,
      );
      const fences = [];
      for (const row of fenceRows) {
        const [last] = await ctx.session.query(
          `SELECT CONVERT(fire_id USING utf8mb4) AS fire_id, CAST(token AS CHAR) AS token, ${epochMs('applied_at')} AS applied_at FROM ${ctx.names.applied}
            WHERE resource = ? ORDER BY applied_at DESC, fire_id DESC LIMIT 1`,
          [row['resource_bytes']],
        );
        fences.push({
          resource: String(row['resource']),
          token: storedToken(String(row['token'])),
          appliedFires: Number(row['n'] ?? 0),
          oldestAppliedAt: dateOf(row['oldest']),
          lastAppliedFire: last === undefined ? null : { fireId: String(last['fire_id']), token: storedToken(String(last['token'])), appliedAt: dateOf(last['applied_at'])! },
        });
      }
      const [table] = await ctx.session.query(
        `SELECT (SELECT COUNT(*) FROM ${ctx.names.applied}) AS n, (SELECT ${epochMs('MIN(applied_at)')} FROM ${ctx.names.applied}) AS oldest,
                (SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.tables WHERE table_schema = ${schema} AND table_name = ?) AS bytes`,
        [ctx.names.database, `${ctx.names.table}_applied`],
      );
      return {
        store: 'mysql',
        migrations,
        server,
        appliedFires: { rows: Number(table!['n']), bytes: Number(table!['bytes']), oldest: dateOf(table!['oldest']) },
        fences,
      };
    } catch (err) {
      throw ctx.fail(ctx.defaultResource, 'inspect', err);
    }
  }

  async function auditLog(resource?: string, limit = 20): Promise<AuditEntry[]> {
    const name = resource === undefined ? null : parseResource(resource);
    let rows: Row[];
    try {
      rows = await ctx.session.query(
        `SELECT CONVERT(resource USING utf8mb4) AS resource, CAST(from_token AS CHAR) AS from_token, CAST(to_token AS CHAR) AS to_token, actor, reason, ${epochMs('at')} AS at FROM ${ctx.names.audit}
          WHERE ? IS NULL OR resource = ? ORDER BY id DESC LIMIT ?`,
        [name, name, Math.max(1, Math.min(1000, Math.floor(limit)))],
      );
    } catch (err) {
      throw ctx.fail(name ?? ctx.defaultResource, 'read audit', err);
    }
    return rows.map((row) => auditEntryOf(row, dateOf(row['at'])!));
  }

  return { lowerFence, pruneAppliedFires, lastAppliedFire, lastAppliedFires, appliedFireIds, inspect, auditLog };
}

/**
 * The session's default isolation level, spelled as PostgreSQL does (`repeatable read`): MySQL 8 and
 * MariaDB 11.1+ name the variable `transaction_isolation`, MariaDB 10.x and MySQL 5.7 `tx_isolation`.
 */
async function defaultIsolation(session: MysqlSession<unknown>): Promise<string> {
  for (const variable of ['transaction_isolation', 'tx_isolation']) {
    try {
      const [row] = await session.query(`SELECT @@SESSION.${variable} AS level`);
      return String(row!['level']).toLowerCase().replace(/-/g, ' ');
    } catch {
      // Unknown on this server: try the other spelling.
    }
  }
  return 'unknown';
}

/** A timeout variable in milliseconds (0 when off or unknown on this server); `unit` ms per value unit. */
async function variableMs(session: MysqlSession<unknown>, variable: string, unit: number): Promise<number> {
  try {
    const [row] = await session.query(`SELECT @@SESSION.${variable} AS value`);
    return Math.round(Number(row!['value']) * unit);
  } catch {
    return 0;
  }
}

/** MariaDB's `max_statement_time` is in seconds; MySQL's `max_execution_time` in milliseconds (SELECT only). */
function statementTimeoutMs(session: MysqlSession<unknown>, mariadb: boolean): Promise<number> {
  return mariadb ? variableMs(session, 'max_statement_time', 1000) : variableMs(session, 'max_execution_time', 1);
}

/** Whether this user may KILL other users' sessions (SUPER, or MySQL 8's CONNECTION_ADMIN). */
async function mayEndOthers(session: MysqlSession<unknown>): Promise<boolean> {
  try {
    const grants = await session.query('SHOW GRANTS');
    return grants.some((row) => /GRANT ALL PRIVILEGES ON \*\.\*|\bSUPER\b|\bCONNECTION_ADMIN\b|\bCONNECTION ADMIN\b/.test(String(Object.values(row)[0])));
  } catch {
    return false;
  }
}
