import { leaseObjectNames } from '@fenced/coordinator/postgres';
import type pg from 'pg';
import { jobsOfRecord, type ElectionRecord, type LeaseStatus } from './status-types.js';

/**
 * The leases of a PostgreSQL lease store (`postgresLeases`, beside the guard's table): holder,
 * token, time left by the server's clock, the record of fires and the last elections. Read in one
 * snapshot (one REPEATABLE READ transaction), with the server's clock as `now`.
 */
export async function readPostgresLeases(pool: pg.Pool, schema: string, table: string, only: readonly string[] | undefined, history: number): Promise<{ now: number; leases: LeaseStatus[] }> {
  const names = leaseObjectNames(schema, table);
  const client = await pool.connect();
  let lost: Error | undefined;
  client.on('error', (err) => (lost ??= err));
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const now = Number((await client.query<{ ms: string }>(`SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS ms`)).rows[0]!.ms);
    // Never migrated here: no lease yet (`fenced doctor` says what to run).
    if ((await client.query<{ t: string | null }>(`SELECT to_regclass($1) AS t`, [names.elections])).rows[0]!.t === null) {
      await client.query('COMMIT');
      return { now, leases: [] };
    }
    const leases = await client.query<{ name: string; token: string; holder: string | null; left_ms: string | null }>(
      `SELECT name, token::text, holder, CASE WHEN holder IS NOT NULL AND expires_at > clock_timestamp() THEN ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint::text END AS left_ms
         FROM ${names.leases} WHERE $1::text[] IS NULL OR name = ANY($1::text[]) ORDER BY name`,
      [only === undefined ? null : [...only]],
    );
    const fires = await client.query<{ lease: string; field: string; value: string }>(`SELECT lease, field, value::text FROM ${names.fires}`);
    // Ordered by the row number (token descending, as a number): in the outer ORDER BY, `token`
    // would name the output column, token::text, and sort 9 above 10.
    const elections = await client.query<{ lease: string; token: string; node: string; ttl_ms: string; fences: number; regressed: boolean; at: Date }>(
      `SELECT lease, token::text, node, ttl_ms::text, fences, regressed, at FROM (
         SELECT e.*, row_number() OVER (PARTITION BY lease ORDER BY token DESC) AS n FROM ${names.elections} e) x
        WHERE n <= $1 ORDER BY lease, n`,
      [history],
    );
    await client.query('COMMIT');
    return {
      now,
      leases: leases.rows.map((row): LeaseStatus => {
        const own = Object.fromEntries(fires.rows.filter((f) => f.lease === row.name).map((f) => [f.field, f.value]));
        const jobs = jobsOfRecord(own);
        const live = row.left_ms !== null && row.holder !== null;
        return {
          lease: row.name,
          leader: live ? { node: row.holder!, token: row.token } : null,
          timeLeftMs: live ? Number(row.left_ms) : null,
          counter: row.token,
          jobs,
          failoverGapMs: own[':failover-gap'] === undefined ? null : Number(own[':failover-gap']),
          elections: elections.rows
            .filter((e) => e.lease === row.name)
            .map((e): ElectionRecord => ({ at: e.at.toISOString(), token: e.token, node: e.node, ttlMs: Number(e.ttl_ms), fences: e.fences, regressed: e.regressed })),
        };
      }),
    };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release(lost ?? false);
  }
}
