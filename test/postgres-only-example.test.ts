/**
 * The README's PostgreSQL-only Quick start (`pnpm example:postgres-only`) runs as a user runs it, as
 * its own process with no Redis anywhere (REDIS_URL unset, and no Redis client in it): a leader
 * elected on a lease row, invoices written, a handover, the deposed token refused.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { testDatabaseUrl } from '#test-support';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));

describe('the PostgreSQL-only example', () => {
  it('elects, writes, hands over and refuses the deposed token with nothing but the database', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: testDatabaseUrl() };
    delete env['REDIS_URL'];
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', 'examples/postgres-only/billing.ts'], { cwd: root, env, timeout: 90_000 });
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
});
