import { freePort } from '@fenced/chaos';
import { testDatabaseUrl, waitFor } from '#test-support';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { ReleaseNotifications, type ListeningMode, type ReleaseHandlers } from './release-notifications.js';

// How a PostgreSQL backend's standbys hear releases, judged on its own (the lease store's tests judge
// it through handovers): who is woken by what, on a real LISTEN connection, by polling, and while the
// database cannot be reached.

const stoppers: Array<() => Promise<unknown> | void> = [];
let n = 0;
afterEach(async () => {
  for (const stop of stoppers.splice(0).reverse()) await stop();
});

function pool(connectionString = testDatabaseUrl()): pg.Pool {
  const p = new pg.Pool({ connectionString, max: 4, application_name: `relnotify-${process.pid}-${++n}`, connectionTimeoutMillis: 2000 });
  p.on('error', () => {});
  stoppers.push(() => p.end().catch(() => undefined));
  return p;
}

/** A subscriber that counts what it hears. */
function listener(): ReleaseHandlers & { releases: number; errors: unknown[]; modes: Array<[ListeningMode, string]> } {
  const h = {
    releases: 0,
    errors: [] as unknown[],
    modes: [] as Array<[ListeningMode, string]>,
    onRelease: () => void h.releases++,
    onError: (error: unknown) => void h.errors.push(error),
    onListening: (mode: ListeningMode, reason: string) => void h.modes.push([mode, reason]),
  };
  return h;
}

function releaseNotifications(p: pg.Pool, options: { listen?: 'auto' | 'poll'; pollMs?: number; pollFree?: (leases: readonly string[]) => Promise<readonly string[]> } = {}): { channel: string; notifications: ReleaseNotifications } {
  const channel = `relnotify_${process.pid}_${++n}`;
  const notifications = new ReleaseNotifications({ pool: p, channel, listen: options.listen ?? 'auto', pollMs: options.pollMs ?? 60_000, probeTimeoutMs: 5000, pollFree: options.pollFree ?? (async () => []) });
  return { channel, notifications };
}

/** How many sessions of `p` are LISTENing on `channel` now. */
async function listeningOn(p: pg.Pool, channel: string): Promise<number> {
  const { rows } = await p.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND query = $2`, [(p.options as { application_name: string }).application_name, `LISTEN "${channel}"`]);
  return (rows[0] as { n: number }).n;
}

describe('release notifications on PostgreSQL', () => {
  it('wake the subscribers of the released lease only (a probe wakes nobody), one subscriber goes alone, and the LISTEN connection with the last', async () => {
    const p = pool();
    const { channel, notifications } = releaseNotifications(p);
    const [a1, a2, b] = [listener(), listener(), listener()];
    const offA1 = await notifications.subscribe('a', a1, 10_000);
    const offA2 = await notifications.subscribe('a', a2, 10_000);
    const offB = await notifications.subscribe('b', b, 10_000);
    expect(notifications.mode).toBe('notify');
    // Each told once how it hears releases: the first when LISTEN was proven, the later ones at once.
    for (const h of [a1, a2, b]) expect(h.modes).toEqual([['notify', 'LISTEN in place']]);

    const notify = (payload: string) => p.query('SELECT pg_notify($1, $2)', [channel, payload]);
    await notify('a');
    await waitFor(() => a1.releases === 1 && a2.releases === 1, 10_000);
    // NOTIFYs arrive in order on one connection: once b heard its own, nothing more was on the way.
    await notify(':probe:not-a-lease');
    await notify('b');
    await waitFor(() => b.releases === 1, 10_000);
    expect([a1.releases, a2.releases]).toEqual([1, 1]);

    offA1();
    await notify('a');
    await notify('b');
    await waitFor(() => b.releases === 2, 10_000);
    expect([a1.releases, a2.releases]).toEqual([1, 2]);

    const listening = () => listeningOn(p, channel);
    expect(await listening()).toBe(1);
    offA2();
    expect(await listening(), 'b still listens').toBe(1);
    offB();
    await waitFor(async () => (await listening()) === 0, 10_000);
    expect(notifications.mode).toBeUndefined();
    for (const h of [a1, a2, b]) expect(h.errors).toEqual([]);

    // A later subscriber starts it all again.
    const again = listener();
    stoppers.push(await notifications.subscribe('a', again, 10_000));
    expect(again.modes).toEqual([['notify', 'LISTEN in place']]);
    await notify('a');
    await waitFor(() => again.releases === 1, 10_000);
  });

  it('an unsubscribe while LISTEN is being set up leaves no connection behind, and tells nobody of a mode', async () => {
    const p = pool();
    const { channel, notifications } = releaseNotifications(p);
    const h = listener();
    // A wait of 1 ms: the subscribe gives up waiting (a node must start) while the connect, the LISTEN
    // and the probe go on; the unsubscribe comes in the middle of them.
    const off = await notifications.subscribe('a', h, 1);
    off();
    expect(notifications.mode).toBeUndefined();
    // The connect it had begun ends in a release: no client of the pool checked out, no session
    // LISTENing (the pool's idle clients, the probe's among them on a busy machine, are not its).
    const listening = () => listeningOn(p, channel);
    const checkedOut = () => p.totalCount - p.idleCount;
    await waitFor(async () => checkedOut() === 0 && (await listening()) === 0, 10_000);
    expect(h.modes).toEqual([]);
    expect(notifications.mode).toBeUndefined();
  });

  it('polling: every subscribed lease is looked at, each free one wakes its own subscribers, and a failed look is every subscriber’s error', async () => {
    let free: readonly string[] = [];
    let failure: Error | undefined;
    const looked: string[][] = [];
    const { notifications } = releaseNotifications(pool(), {
      listen: 'poll',
      pollMs: 20,
      pollFree: async (leases) => {
        looked.push([...leases]);
        if (failure !== undefined) throw failure;
        return free;
      },
    });
    const [a, b] = [listener(), listener()];
    stoppers.push(await notifications.subscribe('a', a, 10_000));
    stoppers.push(await notifications.subscribe('b', b, 10_000));
    expect(a.modes).toEqual([['polling', 'listen: poll was chosen']]);
    expect(b.modes).toEqual([['polling', 'listen: poll was chosen']]);
    await waitFor(() => looked.some((l) => l.length === 2), 10_000);
    expect(looked.find((l) => l.length === 2)?.sort()).toEqual(['a', 'b']);
    expect(a.releases + b.releases).toBe(0);

    free = ['b'];
    await waitFor(() => b.releases >= 2, 10_000);
    expect(a.releases).toBe(0);

    failure = new Error('the look failed');
    await waitFor(() => a.errors.length >= 1 && b.errors.length >= 1, 10_000);
    expect(a.errors[0]).toBe(failure);
    // It goes on looking after a failure.
    failure = undefined;
    free = ['a'];
    await waitFor(() => a.releases >= 1, 10_000);
  });

  it('with the database out of reach: each failed connect reported, polled meanwhile, and the attempts back off from 50 ms', async () => {
    // Nothing listens on this port: every connect is refused at once.
    const p = pool(`postgres://postgres@127.0.0.1:${await freePort()}/test`);
    const looked: number[] = [];
    const { notifications } = releaseNotifications(p, {
      pollMs: 20,
      pollFree: async () => {
        looked.push(performance.now());
        return [];
      },
    });
    const h = listener();
    const from = performance.now();
    stoppers.push(await notifications.subscribe('a', h, 10_000));
    expect(h.errors.length).toBeGreaterThanOrEqual(1);
    expect(h.modes[0]).toEqual(['polling', 'the LISTEN connection is down; reconnecting']);
    await waitFor(() => h.errors.length >= 4, 10_000);
    const elapsed = performance.now() - from;
    // Attempts 50, 100, 200, 400 ms apart (doubling): the fourth failure comes 350 ms after the first
    // at the soonest. A busy machine only spaces them further.
    expect(elapsed, `${h.errors.length} failed connects in ${Math.round(elapsed)} ms`).toBeGreaterThanOrEqual(350);
    expect(looked.length, 'polled while down').toBeGreaterThanOrEqual(1);
    expect(notifications.mode).toBe('polling');
  });
});
