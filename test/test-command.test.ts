import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Runs the README's test command (`pnpm test` runs this script) with the given environment. */
function testCommand(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['scripts/test.mjs'], { cwd: root, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr, ms: performance.now() - started }));
  });
}

describe('pnpm test with services it cannot use', () => {
  it.each([
    ['a database that does not exist', { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/fenced_no_such_db' }, /PostgreSQL at DATABASE_URL cannot be used: database "fenced_no_such_db" does not exist; set DATABASE_URL/],
    ['a malformed DATABASE_URL', { DATABASE_URL: '::not a url' }, /DATABASE_URL is not a valid URL .*set DATABASE_URL/],
    ['a Redis that does not answer', { REDIS_URL: 'redis://127.0.0.1:1' }, /Redis at REDIS_URL cannot be used: .*ECONNREFUSED.*set REDIS_URL/],
  ])('%s: stops first, with one line saying what to set, exit 2', async (_label, env, message) => {
    const result = await testCommand(env);
    expect(result.code).toBe(2);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(message);
    expect(result.stdout).not.toMatch(/Test Files/); // no test ran
  });
});
