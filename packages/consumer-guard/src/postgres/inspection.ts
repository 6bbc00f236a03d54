import { parseResource } from '@fenced/shared';
import type { AdminContext } from './postgres-admin.js';
import { LATEST_MIGRATION } from './migrator.js';
import { auditEntryOf, type AuditEntry, type GuardInspection } from '../fence-records.js';

export type { AuditEntry, FenceReport, GuardInspection } from '../fence-records.js';
import { storedToken } from '@fenced/shared/internal';

const asDate = (value: unknown): Date | null => (value === null || value === undefined ? null : new Date(value as string | Date));

/** Reads of the installation outside any write path: one round trip per question, nothing locked. */
export function inspectionOperations(ctx: Omit<AdminContext, 'onLowered'>) {
  async function inspect(): Promise<GuardInspection> {
    try {
      const [state] = await ctx.session.query({
        text: `SELECT to_regclass($1) IS NOT NULL AS migrated_table,
                      to_regclass($2) IS NOT NULL AS applied_table,
                      current_setting('default_transaction_isolation') AS isolation,
                      current_setting('default_transaction_read_only') AS read_only,
                      current_setting('server_version') AS version,
                      extract(epoch FROM current_setting('lock_timeout')::interval) * 1000 AS lock_timeout,
                      extract(epoch FROM current_setting('statement_timeout')::interval) * 1000 AS statement_timeout,
                      extract(epoch FROM current_setting('idle_in_transaction_session_timeout')::interval) * 1000 AS idle_timeout,
                      (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) OR pg_has_role(current_user, 'pg_signal_backend', 'MEMBER') AS may_end`,
        values: [ctx.names.migrations, ctx.names.applied],
      });
      const server = {
        version: `PostgreSQL ${String(state!['version'])}`,
        defaultIsolation: String(state!['isolation']),
        readOnly: state!['read_only'] === 'on',
        lockTimeoutMs: Number(state!['lock_timeout']),
        statementTimeoutMs: Number(state!['statement_timeout']),
        idleInTransactionTimeoutMs: Number(state!['idle_timeout']),
        mayEndOtherRoles: state!['may_end'] === true,
      };
      const applied = state!['migrated_table'] === true ? Number((await ctx.session.query({ text: `SELECT coalesce(max(id), 0) AS id FROM ${ctx.names.migrations}`, values: [] }))[0]!['id']) : 0;
      const migrations = { applied, known: LATEST_MIGRATION };
      if (state!['applied_table'] !== true) return { store: 'postgres', migrations, fences: [], appliedFires: { rows: 0, bytes: 0, oldest: null }, server };
      // Per resource: the fence, and the record of applied fires (count, oldest, latest) in one pass.
      const fenceRows = await ctx.session.query({
        text: `SELECT f.resource, f.token::text AS token, a.n, a.oldest, last.fire_id, last.token::text AS last_token, last.applied_at
                 FROM ${ctx.names.fences} f
                 LEFT JOIN LATERAL (SELECT count(*)::bigint AS n, min(applied_at) AS oldest FROM ${ctx.names.applied} WHERE resource = f.resource) a ON true
                 LEFT JOIN LATERAL (SELECT fire_id, token, applied_at FROM ${ctx.names.applied} WHERE resource = f.resource ORDER BY applied_at DESC, fire_id DESC LIMIT 1) last ON true
                ORDER BY f.resource`,
        values: [],
      });
      const [table] = await ctx.session.query({
        text: `SELECT (SELECT count(*) FROM ${ctx.names.applied})::bigint AS n, (SELECT min(applied_at) FROM ${ctx.names.applied}) AS oldest, pg_total_relation_size($1)::bigint AS bytes`,
        values: [ctx.names.applied],
      });
      return {
        store: 'postgres',
        migrations,
        server,
        appliedFires: { rows: Number(table!['n']), bytes: Number(table!['bytes']), oldest: asDate(table!['oldest']) },
        fences: fenceRows.map((row) => ({
          resource: String(row['resource']),
          token: storedToken(String(row['token'])),
          appliedFires: Number(row['n'] ?? 0),
          oldestAppliedAt: asDate(row['oldest']),
          lastAppliedFire:
            row['fire_id'] === null || row['fire_id'] === undefined
              ? null
              : { fireId: String(row['fire_id']), token: storedToken(String(row['last_token'])), appliedAt: asDate(row['applied_at'])! },
        })),
      };
    } catch (err) {
      throw ctx.fail(ctx.defaultResource, 'inspect', err);
    }
  }

  async function auditLog(resource?: string, limit = 20): Promise<AuditEntry[]> {
    const name = resource === undefined ? null : parseResource(resource);
    let rows: Record<string, unknown>[];
    try {
      rows = await ctx.session.query({
        text: `SELECT resource, from_token::text AS from_token, to_token::text AS to_token, actor, reason, at FROM ${ctx.names.audit}
                WHERE $1::text IS NULL OR resource = $1 ORDER BY id DESC LIMIT $2`,
        values: [name, Math.max(1, Math.min(1000, Math.floor(limit)))],
      });
    } catch (err) {
      throw ctx.fail(name ?? ctx.defaultResource, 'read audit', err);
    }
    return rows.map((row) => auditEntryOf(row, asDate(row['at'])!));
  }

  return { inspect, auditLog };
}
