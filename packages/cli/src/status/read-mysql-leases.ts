import type { Mysql2PoolLike } from '@fenced/consumer-guard/mysql';
import { mysqlLeaseObjectNames } from '@fenced/coordinator/mysql';
import { MYSQL_NOW_US_SQL, withMysqlConnection } from '@fenced/shared/internal';
import { jobsOfRecord, type ElectionRecord, type LeaseStatus } from './status-types.js';

/**
 * The leases of a MySQL/MariaDB lease store (`mysqlLeases`, beside the guard's table, in the pool's
 * database): holder, token, time left by the server's clock, the record of fires and the last
 * elections. Read in one snapshot (one consistent-snapshot, read-only transaction), with the
 * server's clock as `now`.
 */
export async function readMysqlLeases(pool: Mysql2PoolLike, table: string, only: readonly string[] | undefined, history: number): Promise<{ now: number; leases: LeaseStatus[] }> {
  const names = mysqlLeaseObjectNames(null, table);
  return withMysqlConnection(pool, async (connection) => {
    const rows = (sql: string, values: unknown[] = []) => connection.run(sql, values);
    try {
      await connection.run('START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY');
      const now = Number((await rows(`SELECT CAST(FLOOR(${MYSQL_NOW_US_SQL} / 1000) AS CHAR) AS ms`))[0]!['ms']);
      // Never migrated here: no lease yet (`fenced doctor` says what to run).
      const migrated = await rows('SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?', [`${table}_elections`]);
      if (migrated.length === 0) {
        await connection.run('COMMIT');
        return { now, leases: [] };
      }
      const leases = await rows(
        `SELECT CAST(name AS CHAR CHARACTER SET utf8mb4) AS name, CAST(token AS CHAR) AS token, CAST(holder AS CHAR CHARACTER SET utf8mb4) AS holder,
                CASE WHEN holder IS NOT NULL AND expires_us > ${MYSQL_NOW_US_SQL} THEN CAST(CEILING((expires_us - ${MYSQL_NOW_US_SQL}) / 1000) AS CHAR) END AS left_ms
           FROM ${names.leases} ${only === undefined ? '' : 'WHERE name IN (?)'} ORDER BY name`,
        only === undefined ? [] : [[...only]],
      );
      const fires = await rows(`SELECT CAST(lease AS CHAR CHARACTER SET utf8mb4) AS lease, CAST(field AS CHAR CHARACTER SET utf8mb4) AS field, CAST(value AS CHAR) AS value FROM ${names.fires}`);
      // Ordered by the row number (token descending, as a number), never by the token as text.
      const elections = await rows(
        // The text forms get names of their own: an alias `token` would be what the window sorts by.
        `SELECT lease_text AS lease, token_text AS token, node, ttl_ms, fences, regressed, at_us FROM (
           SELECT CAST(e.lease AS CHAR CHARACTER SET utf8mb4) AS lease_text, CAST(e.token AS CHAR) AS token_text, CAST(e.node AS CHAR CHARACTER SET utf8mb4) AS node,
                  CAST(e.ttl_ms AS CHAR) AS ttl_ms, e.fences, e.regressed, CAST(e.at_us AS CHAR) AS at_us,
                  ROW_NUMBER() OVER (PARTITION BY e.lease ORDER BY e.token DESC) AS n
             FROM ${names.elections} e) x
          WHERE n <= ? ORDER BY lease_text, n`,
        [history],
      );
      await connection.run('COMMIT');
      return {
        now,
        leases: leases.map((row): LeaseStatus => {
          const name = String(row['name']);
          const own = Object.fromEntries(fires.filter((f) => f['lease'] === name).map((f) => [String(f['field']), String(f['value'])]));
          const live = row['left_ms'] != null && row['holder'] != null;
          return {
            lease: name,
            leader: live ? { node: String(row['holder']), token: String(row['token']) } : null,
            timeLeftMs: live ? Number(row['left_ms']) : null,
            counter: String(row['token']),
            jobs: jobsOfRecord(own),
            failoverGapMs: own[':failover-gap'] === undefined ? null : Number(own[':failover-gap']),
            elections: elections
              .filter((e) => e['lease'] === name)
              .map(
                (e): ElectionRecord => ({
                  at: new Date(Number(BigInt(String(e['at_us'])) / 1000n)).toISOString(),
                  token: String(e['token']),
                  node: String(e['node']),
                  ttlMs: Number(e['ttl_ms']),
                  fences: Number(e['fences']),
                  regressed: Number(e['regressed']) === 1,
                }),
              ),
          };
        }),
      };
    } catch (err) {
      await connection.run('ROLLBACK').catch(() => undefined);
      throw err;
    }
  });
}
