/**
 * The queue examples run as a user runs them (`pnpm example:<queue>`), each as its own process
 * against the local services: they end with one ledger row per applied fire, a stale copy refused
 * and a second delivery dropped.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createTestDatabase, testRedisUrl } from '#test-support';
import { describe, expect, it, onTestFinished } from 'vitest';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

describe('the queue examples', () => {
  it.each(['bullmq', 'graphile-worker', 'pg-boss'])('examples/queues/%s.ts runs to its summary', async (example) => {
    // A database of its own: graphile-worker's workers stop when any graphile-worker schema in their
    // database is migrated (its `worker:migrate` notification is database-wide), and other test
    // files migrate theirs meanwhile.
    const database = await createTestDatabase('example');
    onTestFinished(() => database.drop());
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', `examples/queues/${example}.ts`], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: database.url, REDIS_URL: testRedisUrl() },
      timeout: 90_000,
    });
    const summary = /stale refused: (\d+), duplicate dropped: (\d+), ledger rows: (\d+) \(one per applied fire: (\d+)\)/.exec(stdout);
    expect(summary, stdout).not.toBeNull();
    const [, stale, duplicate, rows, applied] = summary!.map(Number);
    expect({ stale, duplicate }).toEqual({ stale: 1, duplicate: 1 });
    expect(rows).toBe(applied);
    expect(applied).toBeGreaterThanOrEqual(5);
  }, 120_000);
});
