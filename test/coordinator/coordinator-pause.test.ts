import { createCoordinator } from '@fenced/coordinator';
import { createRedis, deleteKeys, spawnTs, testRedisUrl, uniquePrefix, waitFor, type ChildHandle } from '#test-support';
import { afterEach, describe, expect, it } from 'vitest';

const TTL = 500;
const holdFault = (ms: number) => new Promise((r) => setTimeout(r, ms));
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

    const standby = createCoordinator({ redis, lease: 'paused', keyPrefix: prefix, ttlMs: TTL, renewIntervalMs: 100, acquireRetryMs: 50 });
    await standby.start();
    expect(standby.isLeader()).toBe(false);

    child.kill('SIGSTOP');
    await waitFor(() => standby.isLeader(), 20_000, 2); // elected while the old leader sleeps
    // Keep the old leader frozen a while longer: the fault's length, chosen, not a wait for an outcome.
    await holdFault(300);
    child.kill('SIGCONT');
    const lost = await child.waitForLine((l) => l.kind === 'lost', 20_000);
    // Its first tick after the loss is what the assertions below look at.
    await child.waitForLine((l) => l.kind === 'tick', 20_000, child.lines.indexOf(lost));

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
