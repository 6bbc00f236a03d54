import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

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

describe('the services a failed setup started', () => {
  it('a MySQL it cannot use beside an etcd cluster it starts: the cluster is stopped, not left running', async () => {
    // A TMPDIR of its own: every etcd the setup starts keeps its data under it, so the processes left
    // running afterwards are found by that path alone, whatever else the machine runs.
    const tmp = mkdtempSync(join(tmpdir(), 'fenced-setup-'));
    const script = `import { resolveServices } from './test/support/services.ts';
try { await resolveServices({ mysql: true, etcd: true }); console.log('resolved'); } catch (err) { console.log(String(err)); }
process.exit(0);`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', '--input-type=module', '-e', script], {
      cwd: root,
      env: { ...process.env, TMPDIR: tmp, MYSQL_URL: 'mysql://root@127.0.0.1:1/test', ETCD_ENDPOINTS: '' },
    });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    // The cluster's data directory, seen while the setup runs: it did start one (stop removes it).
    let started = false;
    const look = setInterval(() => (started ||= readdirSync(tmp).some((name) => name.startsWith('fenced-etcd-'))), 10);
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    clearInterval(look);
    const left = processesUnder(tmp);
    for (const pid of left) process.kill(pid, 'SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
    expect(code).toBe(0);
    expect(stdout).toMatch(/MySQL at MYSQL_URL cannot be used/);
    expect(started).toBe(true);
    expect(left).toEqual([]);
  }, 60_000);
});

/** The PIDs of the processes whose command line names a path under `dir`. */
function processesUnder(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(dir)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}
