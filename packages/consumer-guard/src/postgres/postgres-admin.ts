import type { Token } from '@fenced/shared';
import { storedToken } from '@fenced/shared/internal';
import type { GuardObjectNames } from './names.js';
import type { GuardSession } from './session.js';
import { reportLowered, type SqlAdminContext } from '../sql/admin-context.js';
import { checkPruneAge, latestFireByJob, type AppliedFire, type ParsedLowerFenceRequest } from '../fence-records.js';

/** What the admin operations need from the guard that owns them. */
export type AdminContext = SqlAdminContext<GuardSession<unknown>, GuardObjectNames>;

/**
 * The PostgreSQL guard's operations outside the write path: the audited lowering of a fence, pruning
 * and reading the table of applied fires. None of them is on a write's hot path.
 */
export function adminOperations(ctx: AdminContext) {
  async function lowerFence(request: ParsedLowerFenceRequest): Promise<Token | null> {
    const { resource, token } = request;
    let rows: Record<string, unknown>[];
    try {
      rows = await ctx.session.query({
        text: `SELECT ${ctx.names.lowerFn}($1::text, $2::bigint, $3::text, $4::text)::text AS previous`,
        values: [resource, token, request.actor, request.reason],
      });
    } catch (err) {
      throw ctx.fail(resource, 'lower fence', err);
    }
    return reportLowered(ctx, request, typeof rows[0]?.['previous'] === 'string' ? storedToken(rows[0]['previous'] as string) : null);
  }

  async function pruneAppliedFires(olderThanMs: number): Promise<number> {
    checkPruneAge(olderThanMs);
    try {
      const rows = await ctx.session.query({
        text: `WITH gone AS (DELETE FROM ${ctx.names.applied} WHERE applied_at < now() - make_interval(secs => $1::double precision / 1000) RETURNING 1) SELECT count(*)::int AS n FROM gone`,
        values: [olderThanMs],
      });
      return Number(rows[0]?.['n'] ?? 0);
    } catch (err) {
      throw ctx.fail(ctx.defaultResource, 'prune applied fires', err);
    }
  }

  async function lastAppliedFire(): Promise<AppliedFire | null> {
    let rows: Record<string, unknown>[];
    try {
      rows = await ctx.session.query({
        text: `SELECT fire_id, token::text AS token, applied_at FROM ${ctx.names.applied} WHERE resource = $1 ORDER BY applied_at DESC, fire_id DESC LIMIT 1`,
        values: [ctx.defaultResource],
      });
    } catch (err) {
      throw ctx.fail(ctx.defaultResource, 'read applied fires', err);
    }
    const row = rows[0];
    if (row === undefined) return null;
    return { fireId: String(row['fire_id']), token: storedToken(String(row['token'])), appliedAt: new Date(row['applied_at'] as string | Date) };
  }

  /**
   * Per job, the latest scheduled fire applied to `resource` since `since`, in one query. Scheduler
   * fire ids are `<job>@<fixed-width UTC time>`, so within a job the largest id in byte order
   * (COLLATE "C") is the latest fire. Bounded by applied_at, which the BRIN index serves, so the scan
   * covers the recent window rather than the whole retention.
   */
  async function lastAppliedFires(resource: string, since: Date): Promise<ReadonlyMap<string, number>> {
    let rows: Record<string, unknown>[];
    try {
      rows = await ctx.session.query({
        text: `SELECT max(fire_id COLLATE "C") AS fire_id FROM ${ctx.names.applied}
                WHERE resource = $1 AND applied_at >= $2::timestamptz AND strpos(fire_id, '@') > 1
                GROUP BY split_part(fire_id, '@', 1)`,
        values: [resource, since.toISOString()],
      });
    } catch (err) {
      throw ctx.fail(resource, 'read applied fires', err);
    }
    return latestFireByJob(rows.map((row) => String(row['fire_id'])));
  }

  /** Which of `fireIds` have a claim on `resource`: one query on the table's primary key. */
  async function appliedFireIds(resource: string, fireIds: readonly string[]): Promise<ReadonlySet<string>> {
    if (fireIds.length === 0) return new Set();
    let rows: Record<string, unknown>[];
    try {
      rows = await ctx.session.query({
        // The ids travel as one JSON array: the session's statements take scalar parameters only.
        text: `SELECT fire_id FROM ${ctx.names.applied}
                WHERE resource = $1 AND fire_id = ANY(ARRAY(SELECT jsonb_array_elements_text($2::jsonb)))`,
        values: [resource, JSON.stringify(fireIds)],
      });
    } catch (err) {
      throw ctx.fail(resource, 'read applied fires', err);
    }
    return new Set(rows.map((row) => String(row['fire_id'])));
  }

  return { lowerFence, pruneAppliedFires, lastAppliedFire, lastAppliedFires, appliedFireIds };
}
