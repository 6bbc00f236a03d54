import { createCoordinator } from '@fenced/coordinator';
import { createRedis, deleteKeys, spawnTs, testRedisUrl, uniquePrefix, waitFor, type ChildHandle } from '#test-support';
import { afterEach, describe, expect, it } from 'vitest';

const TTL = 500;
let child: ChildHandle | undefined;
afterEach(() => child?.kill());

describe('a leader stopped with SIGSTOP for longer than its TTL', () => {
  it('knows it no longer leads the moment it resumes, before it dispatches anything', async () => {
    const prefix = uniquePrefix('pause');
    const redis = createRedis();
    child = spawnTs('test/fixtures/leader-process.ts', {
      REDIS_URL: testRedisUrl(),
      KEY_PREFIX: prefix,
      TTL_MS: String(TTL),
      RENEW_MS: '100',
    });
    const elected = await child.waitForLine((l) => l.kind === 'elected', 20_000);
    const childToken = BigInt(elected.token as string);
    await child.waitForLine((l) => l.kind === 'dispatch');

    const standby = createCoordinator({ redis, name: 'paused', keyPrefix: prefix, ttlMs: TTL, renewIntervalMs: 100, acquireRetryMs: 50 });
    await standby.start();
    expect(standby.isLeader()).toBe(false);

    child.kill('SIGSTOP');
    await waitFor(() => standby.isLeader(), TTL * 4, 2); // elected while the old leader sleeps
    await new Promise((r) => setTimeout(r, 300)); // stay paused well past the TTL
    child.kill('SIGCONT');
    await child.waitForLine((l) => l.kind === 'lost', 5000);
    await new Promise((r) => setTimeout(r, 200));

    // The pause is the one gap longer than the TTL between consecutive lines, in the child's own time.
    const resumedAt = child.lines.findIndex((l, i) => i > 0 && (l.t as number) - (child!.lines[i - 1]!.t as number) > TTL);
    expect(resumedAt).toBeGreaterThan(0);
    const afterResume = child.lines.slice(resumedAt);
    const firstTick = afterResume.find((l) => l.kind === 'tick' || l.kind === 'dispatch');
    expect(firstTick).toMatchObject({ kind: 'tick', leader: false });
    expect(afterResume.filter((l) => l.kind === 'dispatch')).toEqual([]);
    expect(afterResume.find((l) => l.kind === 'lost')).toMatchObject({ reason: 'deadline' });
    expect(standby.token()!).toBeGreaterThan(childToken);

    await standby.stop();
    await deleteKeys(redis, prefix);
    redis.disconnect();
  });
});
