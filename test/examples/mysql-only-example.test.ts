/**
 * The README's MySQL-only Quick start (`pnpm example:mysql-only`) runs as a user runs it, as its own
 * process with nothing but MySQL/MariaDB (REDIS_URL and DATABASE_URL unset, no client of either in
 * it): a leader elected on a lease row, invoices written, a handover, the deposed token refused.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freePort } from '@fenced/chaos';
import { testMysqlUrl } from '#test-support';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const example = ['--import', 'tsx', '--conditions=@fenced/source', 'examples/mysql-only/billing.ts'];

function nothingButMysql(url: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, MYSQL_URL: url };
  delete env['REDIS_URL'];
  delete env['DATABASE_URL'];
  return env;
}

describe('the MySQL-only example', () => {
  it('elects, writes, hands over and refuses the deposed token with nothing but the database', async () => {
    const { stdout } = await run(process.execPath, example, { cwd: root, env: nothingButMysql(testMysqlUrl()), timeout: 90_000 });
    expect(stdout.split('\n')[0]).toMatch(/^using MySQL\/MariaDB at MYSQL_URL \(mysql:\/\/[^)]*\)$/);
    expect(stdout).toMatch(/^replica-a: elected, token (\d+)$/m);
    const handover = /^handover: replica-b leads (\d+) ms after replica-a stepped down$/m.exec(stdout);
    expect(handover, stdout).not.toBeNull();
    expect(stdout).toMatch(/^the deposed leader's write \(token \d+\) was refused: (STALE_TOKEN|NOT_LEADER)$/m);
    const summary = /^invoices: replica-a (\d+) \(token (\d+)\), replica-b (\d+) \(token (\d+)\); nothing but MySQL\/MariaDB$/m.exec(stdout);
    expect(summary, stdout).not.toBeNull();
    const [, aRows, aToken, bRows, bToken] = summary!.map(Number);
    expect(aRows).toBeGreaterThanOrEqual(3);
    expect(bRows).toBeGreaterThanOrEqual(2);
    expect(bToken).toBeGreaterThan(aToken!);
  }, 120_000);

  it('an unreachable MYSQL_URL: one line naming it and why, exit 2, the password hidden', async () => {
    const closed = await freePort();
    const failed = await run(process.execPath, example, { cwd: root, env: nothingButMysql(`mysql://root:secret@127.0.0.1:${closed}/test`), timeout: 60_000 }).then(
      () => undefined,
      (err: { code?: number; stderr?: string }) => err,
    );
    expect(failed?.code).toBe(2);
    expect(failed?.stderr?.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`^example: cannot use MYSQL_URL \\(mysql://root:\\*\\*\\*@127\\.0\\.0\\.1:${closed}/test\\): .*ECONNREFUSED`))]);
    expect(failed?.stderr).not.toContain('secret');
  }, 90_000);
});
