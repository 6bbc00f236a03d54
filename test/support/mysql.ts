import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { inject } from 'vitest';

/**
 * The MariaDB (or MySQL) server of this run: `MYSQL_URL`, or the private MariaDB the global setup
 * started for the unit project (test/support/services.ts).
 */
export function testMysqlUrl(): string {
  const url = inject('mysqlUrl');
  if (url === '') throw new Error('no MySQL/MariaDB for this project: set MYSQL_URL, or install mariadb-server so the unit project can start one');
  return url;
}

/**
 * A mysql2 promise pool on `database` of the run's server (`null`: none chosen), as `user` (without a
 * password) when given.
 */
export function createMysqlPool(options: { database?: string | null; user?: string; connectionLimit?: number } = {}): mysql.Pool {
  const url = new URL(testMysqlUrl());
  if (options.database !== undefined) url.pathname = options.database === null ? '/' : `/${options.database}`;
  if (options.user !== undefined) {
    url.username = options.user;
    url.password = '';
  }
  return mysql.createPool({ uri: url.toString(), connectionLimit: options.connectionLimit ?? 10 });
}

/** A database of its own for one test file: created now, dropped (with everything in it) by `drop()`. */
export async function createTestMysqlDatabase(prefix = 't'): Promise<{ name: string; pool: mysql.Pool; drop: () => Promise<void> }> {
  const name = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = createMysqlPool({ connectionLimit: 1 });
  await admin.query(`CREATE DATABASE \`${name}\``);
  const pool = createMysqlPool({ database: name });
  return {
    name,
    pool,
    drop: async () => {
      await pool.end();
      await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await admin.end();
    },
  };
}

/**
 * Makes the server refuse every update (or insert) of `table` whose `column` is `value` as InnoDB
 * refuses the loser of a deadlock (error 1213, SQLSTATE 40001), from a trigger that first counts the
 * attempt in a table no rollback undoes (Aria is not transactional). A deadlock every time, on
 * demand: what a retry bound is tested with. `attempts()` reads the count; `drop()` removes both.
 */
export async function deadlockEvery(
  pool: mysql.Pool,
  on: { table: string; event: 'INSERT' | 'UPDATE'; column: string; value: string },
): Promise<{ attempts(): Promise<number>; drop(): Promise<void> }> {
  const counter = `deadlocks_${randomBytes(4).toString('hex')}`;
  await pool.query(`CREATE TABLE ${counter} (n INT) ENGINE=Aria`);
  await pool.query(
    `CREATE TRIGGER ${counter} BEFORE ${on.event} ON ${on.table} FOR EACH ROW BEGIN
       IF NEW.${on.column} = ? THEN
         INSERT INTO ${counter} VALUES (1);
         SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'Deadlock found when trying to get lock; try restarting transaction';
       END IF;
     END`,
    [on.value],
  );
  return {
    async attempts() {
      const [rows] = await pool.query(`SELECT COUNT(*) AS n FROM ${counter}`);
      return Number((rows as Array<{ n: number }>)[0]!.n);
    },
    async drop() {
      await pool.query(`DROP TRIGGER IF EXISTS ${counter}`);
      await pool.query(`DROP TABLE IF EXISTS ${counter}`);
    },
  };
}
