/**
 * `pnpm example:metrics` as a user runs it: its own process, a real Prometheus exporter scraped over
 * HTTP, pino writing the events. What the README shows must come out of it.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freePort } from '@fenced/chaos';
import { describe, expect, it } from 'vitest';
import { testDatabaseUrl, testRedisUrl } from '#test-support';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));

describe('the metrics example', () => {
  it('serves the fenced series on a Prometheus endpoint and logs every event as a pino JSON line', async () => {
    const port = await freePort();
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', 'examples/metrics/prometheus.ts'], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: testDatabaseUrl(), REDIS_URL: testRedisUrl(), METRICS_PORT: String(port) },
      timeout: 90_000,
    });
    const lines = stdout.trim().split('\n');
    const events = lines.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as { type: string; msg: string; token?: number });
    const elected = events.filter((e) => e.type === 'lease.acquired');
    expect(elected.map((e) => e.token)).toEqual([1, 2]);
    expect(elected[0]!.msg).toBe('lease.acquired');
    expect(events.some((e) => e.type === 'token.rejected')).toBe(true);

    const series = (name: string) => lines.find((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `));
    const value = (name: string, labels = '') => {
      const line = lines.find((l) => l.startsWith(`${name}{`) && l.includes(labels));
      return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
    };
    expect(value('fenced_lease_elections_total', 'fenced_lease_name="billing"')).toBe(2);
    expect(value('fenced_lease_losses_total', 'fenced_lease_loss_reason="stopped"')).toBe(1);
    expect(value('fenced_lease_leader')).toBe(1);
    expect(value('fenced_lease_token')).toBe(2);
    expect(value('fenced_guard_writes_total', 'fenced_guard_outcome="stale",fenced_guard_path="redis"')).toBe(1);
    expect(value('fenced_handler_fires_total', 'fenced_handler_outcome="applied"')).toBeGreaterThanOrEqual(4);
    expect(value('fenced_scheduler_failover_gap_count')).toBe(1);
    expect(series('fenced_scheduler_fire_lateness_sum')).toBeDefined();
  }, 120_000);
});
