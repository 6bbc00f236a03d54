import { freePort, startFaultProxy } from '@fenced/chaos';
import { gate, testDatabaseUrl, waitFor } from '#test-support';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { PgLeasePool } from './pg-pool.js';
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
  // Idle clients are kept: a LISTEN connection given back to the pool, rather than destroyed, stays.
  const p = new pg.Pool({ connectionString, max: 4, application_name: `relnotify-${process.pid}-${++n}`, connectionTimeoutMillis: 2000, idleTimeoutMillis: 0 });
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

function releaseNotifications(
  p: PgLeasePool,
  options: { listen?: 'auto' | 'poll'; pollMs?: number; probeTimeoutMs?: number; pollFree?: (leases: readonly string[]) => Promise<readonly string[]> } = {},
): { channel: string; notifications: ReleaseNotifications } {
  const channel = `relnotify_${process.pid}_${++n}`;
  const notifications = new ReleaseNotifications({ pool: p, channel, listen: options.listen ?? 'auto', pollMs: options.pollMs ?? 60_000, probeTimeoutMs: options.probeTimeoutMs ?? 5000, pollFree: options.pollFree ?? (async () => []) });
  return { channel, notifications };
}

/**
 * `p` as the listener sees it, steered by the test: each connect may be held or failed once the
 * connection is made (`connected`), a checked-out client's statements are counted (its LISTENs), and
 * a statement through the pool (the probe's NOTIFY) may be held or have its values changed (its
 * answers counted); the clients handed out are kept (`clients`).
 */
function steered(
  p: pg.Pool,
  steer: { connected?: (attempt: number) => Promise<void> | void; poolQuery?: (text: string, values: unknown[] | undefined) => Promise<unknown[] | undefined> | unknown[] | undefined } = {},
): { pool: PgLeasePool; seen: { connects: number; listens: number[]; clients: pg.PoolClient[]; poolAnswers: number } } {
  const seen = { connects: 0, listens: [] as number[], clients: [] as pg.PoolClient[], poolAnswers: 0 };
  const steeredPool: PgLeasePool = {
    async query(text, values) {
      const result = await p.query(text, (await steer.poolQuery?.(text, values)) ?? values);
      seen.poolAnswers++;
      return result;
    },
    async connect() {
      const attempt = ++seen.connects;
      const client = await p.connect();
      try {
        await steer.connected?.(attempt);
      } catch (error) {
        client.release(true);
        throw error;
      }
      const query = client.query.bind(client) as (text: string, values?: unknown[]) => Promise<pg.QueryResult>;
      Object.assign(client, {
        query: (text: string, values?: unknown[]) => {
          if (text.startsWith('LISTEN')) seen.listens.push(attempt);
          return query(text, values);
        },
      });
      seen.clients.push(client);
      return client;
    },
  };
  return { pool: steeredPool, seen };
}

/** `p` steered so that the first probe NOTIFY waits for `held` (opened or failed by the test); `probes()` counts those sent. */
function firstProbeHeld(p: pg.Pool): ReturnType<typeof steered> & { held: ReturnType<typeof gate<void>>; probes: () => number } {
  const held = gate();
  let probes = 0;
  const steering = steered(p, {
    poolQuery: async (text, values) => {
      if (text.includes('pg_notify') && ++probes === 1) await held.promise;
      return values;
    },
  });
  return { ...steering, held, probes: () => probes };
}

/** The backend pids of `p`'s sessions that are LISTENing on `channel` now. */
async function listenersOn(p: pg.Pool, channel: string): Promise<number[]> {
  const { rows } = await p.query(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query = $2`, [(p.options as { application_name: string }).application_name, `LISTEN "${channel}"`]);
  return (rows as Array<{ pid: number }>).map((r) => r.pid);
}

/** Whether the backend `pid` is still there (destroyed clients' backends go; pooled ones stay). */
async function backendAlive(pid: number): Promise<boolean> {
  const admin = new pg.Client({ connectionString: testDatabaseUrl() });
  await admin.connect();
  try {
    return (await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rows.length > 0;
  } finally {
    await admin.end();
  }
}

/** How many sessions of `p` are LISTENing on `channel` now. */
async function listeningOn(p: pg.Pool, channel: string): Promise<number> {
  return (await listenersOn(p, channel)).length;
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
    const [listenPid] = await listenersOn(p, channel);
    offA2();
    expect(await listening(), 'b still listens').toBe(1);
    offB();
    await waitFor(async () => (await listening()) === 0, 10_000);
    // Given back with an error, so the pool destroys it: a LISTEN connection is never pooled again.
    await waitFor(async () => !(await backendAlive(listenPid!)), 10_000);
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
    // Told how it hears releases once, not at every failed connect.
    expect(h.modes).toEqual([['polling', 'the LISTEN connection is down; reconnecting']]);
  });

  it('a killed LISTEN connection: every subscriber hears the error once and polls, then LISTEN is back and releases are heard', async () => {
    const p = pool();
    const looked: string[][] = [];
    const { channel, notifications } = releaseNotifications(p, {
      pollMs: 20,
      pollFree: async (leases) => {
        looked.push([...leases]);
        return [];
      },
    });
    const [a, b] = [listener(), listener()];
    stoppers.push(await notifications.subscribe('a', a, 10_000));
    stoppers.push(await notifications.subscribe('b', b, 10_000));
    const [killed] = await listenersOn(p, channel);
    await p.query('SELECT pg_terminate_backend($1)', [killed]);
    await waitFor(async () => notifications.mode === 'notify' && a.modes.length === 3 && (await listeningOn(p, channel)) === 1, 10_000);
    for (const h of [a, b]) {
      expect(h.modes).toEqual([
        ['notify', 'LISTEN in place'],
        ['polling', 'the LISTEN connection is down; reconnecting'],
        ['notify', 'LISTEN in place'],
      ]);
      expect(h.errors).toHaveLength(1);
      // The server's own word (57P01); the connection's end that follows is old news.
      expect(h.errors[0]).toMatchObject({ code: '57P01', message: 'terminating connection due to administrator command' });
    }
    expect(looked.length, 'looked after the reconnect, or polled meanwhile').toBeGreaterThanOrEqual(1);
    expect(await listenersOn(p, channel)).not.toContain(killed);
    await p.query('SELECT pg_notify($1, $2)', [channel, 'b']);
    await waitFor(() => b.releases === 1, 10_000);
    expect(a.releases).toBe(0);
  });

  it('a probe NOTIFY that never arrives (a pooler in transaction mode): polling for good, said why, the LISTEN connection destroyed, and a later start reasons afresh', async () => {
    const p = pool();
    let probesElsewhere = true;
    let refuse = false;
    const { pool: through, seen } = steered(p, {
      // The probe goes out on another channel, as through a pooler that hands the LISTEN's server
      // connection to someone else: it never reaches this LISTEN.
      poolQuery: (text, values) => (probesElsewhere && text.includes('pg_notify') ? [`${String(values?.[0])}_elsewhere`, values?.[1]] : values),
      connected: () => {
        if (refuse) throw new Error('connection refused (steered by the test)');
      },
    });
    const { channel, notifications } = releaseNotifications(through, { probeTimeoutMs: 300 });
    const h = listener();
    const off = await notifications.subscribe('a', h, 10_000);
    const reason = 'a NOTIFY sent through the pool did not reach the LISTEN connection within 300 ms (a pooler in transaction mode?)';
    expect(h.modes).toEqual([['polling', reason]]);
    expect(h.errors).toEqual([]);
    const later = listener();
    stoppers.push(await notifications.subscribe('b', later, 10_000));
    expect(later.modes).toEqual([['polling', reason]]);
    // Destroyed, not pooled: no session LISTENs on the channel, and it is not tried again.
    await waitFor(async () => (await listeningOn(p, channel)) === 0, 10_000);
    expect(seen.connects).toBe(1);

    // Everyone leaves; a later start whose connection cannot be had says so, not the old probe's reason.
    off();
    stoppers.splice(-1, 1)[0]!();
    probesElsewhere = false;
    refuse = true;
    const again = listener();
    stoppers.push(await notifications.subscribe('a', again, 10_000));
    expect(again.modes[0]).toEqual(['polling', 'the LISTEN connection is down; reconnecting']);
  });

  it('a probe NOTIFY or a LISTEN that does not answer within the probe timeout is the connection’s failure: said by name, polled, and tried again', async () => {
    const p = pool();
    const hold = gate();
    let holdProbe = true;
    const { pool: through, seen } = steered(p, { poolQuery: async (text, values) => (holdProbe && text.includes('pg_notify') ? (await hold.promise, values) : values) });
    const { notifications } = releaseNotifications(through, { probeTimeoutMs: 300 });
    const h = listener();
    stoppers.push(await notifications.subscribe('a', h, 10_000));
    expect(h.errors[0]).toMatchObject({ name: 'TimeoutError', message: 'probe NOTIFY timed out after 300 ms' });
    expect(h.modes[0]).toEqual(['polling', 'the LISTEN connection is down; reconnecting']);
    // Tried again (the backoff's first step is 50 ms): with the probe let through, LISTEN is back.
    holdProbe = false;
    hold.open();
    await waitFor(() => notifications.mode === 'notify', 10_000);
    expect(seen.connects).toBe(2);

    // A LISTEN on a connection that went silent (a proxy stalled between the connect and the LISTEN).
    const proxy = await startFaultProxy(Number(new URL(testDatabaseUrl()).port || 5432));
    stoppers.push(() => proxy.close());
    const url = new URL(testDatabaseUrl());
    url.port = String(proxy.port);
    const silent = steered(pool(url.toString()), { connected: (attempt) => void (attempt === 1 && proxy.setMode({ kind: 'stall' })) });
    const other = releaseNotifications(silent.pool, { probeTimeoutMs: 300 });
    const k = listener();
    const subscribed = other.notifications.subscribe('a', k, 10_000);
    await waitFor(() => k.errors.length > 0, 10_000);
    expect(k.errors[0]).toMatchObject({ name: 'TimeoutError', message: 'LISTEN timed out after 300 ms' });
    proxy.setMode({ kind: 'pass' });
    stoppers.push(await subscribed);
    await waitFor(() => other.notifications.mode === 'notify', 10_000);
  });

  it('an unsubscribe and a new subscribe while the first connect is still being made: the old connect keeps nothing, sends no LISTEN, and one connection listens', async () => {
    const p = pool();
    const first = gate();
    let firstHeld = false;
    const { pool: through, seen } = steered(p, { connected: (attempt) => (attempt === 1 ? ((firstHeld = true), first.promise) : undefined) });
    const { channel, notifications } = releaseNotifications(through);
    const early = listener();
    // A wait of 1 ms: the subscribe gives up waiting while its connect is held.
    const offEarly = await notifications.subscribe('a', early, 1);
    offEarly();
    const late = listener();
    const offLate = await notifications.subscribe('a', late, 10_000);
    expect(late.modes).toEqual([['notify', 'LISTEN in place']]);
    await waitFor(() => firstHeld, 10_000);
    first.open();
    // The first connect, once made, is given back without a LISTEN.
    await waitFor(() => p.totalCount - p.idleCount === 1, 10_000);
    expect(seen.listens).toEqual([2]);
    expect(await listenersOn(p, channel)).toHaveLength(1);
    expect(early.modes).toEqual([]);
    expect(late.errors).toEqual([]);
    offLate();
    await waitFor(async () => (await listeningOn(p, channel)) === 0 && p.totalCount - p.idleCount === 0, 10_000);

    // The same, the first connect failing: the new subscriber hears nothing of it, and nothing reconnects.
    const second = gate();
    let secondHeld = false;
    const failing = steered(pool(), { connected: (attempt) => (attempt === 1 ? ((secondHeld = true), second.promise) : undefined) });
    const other = releaseNotifications(failing.pool);
    const gone = listener();
    (await other.notifications.subscribe('a', gone, 1))();
    const now = listener();
    stoppers.push(await other.notifications.subscribe('a', now, 10_000));
    // Failed once its connection is made and held (failed before, nobody would be awaiting it yet).
    await waitFor(() => secondHeld, 10_000);
    second.fail(new Error('connect failed (steered by the test)'));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(now.errors).toEqual([]);
    expect(now.modes).toEqual([['notify', 'LISTEN in place']]);
    expect(failing.seen.connects).toBe(2);
  });

  it('a connect whose probe is under way when everyone leaves and a new subscriber comes is given back, whether its probe then arrives or fails', async () => {
    for (const probeEnds of ['arrives', 'fails'] as const) {
      const p = pool();
      const { pool: through, seen, held: firstProbe, probes } = firstProbeHeld(p);
      const { channel, notifications } = releaseNotifications(through);
      const early = listener();
      const offEarly = await notifications.subscribe('a', early, 1);
      await waitFor(() => probes() === 1, 10_000);
      const [first] = await listenersOn(p, channel);
      offEarly();
      const late = listener();
      const offLate = await notifications.subscribe('a', late, 10_000);
      expect(late.modes).toEqual([['notify', 'LISTEN in place']]);
      const [kept] = (await listenersOn(p, channel)).filter((pid) => pid !== first);
      if (probeEnds === 'arrives') firstProbe.open();
      else firstProbe.fail(new Error('the probe failed (steered by the test)'));
      // The first connection goes (destroyed); the second alone listens.
      await waitFor(async () => (await listeningOn(p, channel)) === 1 && p.totalCount - p.idleCount === 1, 10_000);
      expect(await listenersOn(p, channel), probeEnds).toEqual([kept]);
      expect(seen.listens).toEqual([1, 2]);
      expect(late.errors, probeEnds).toEqual([]);
      expect(late.modes, probeEnds).toEqual([['notify', 'LISTEN in place']]);
      expect(early.modes).toEqual([]);
      expect(seen.connects, probeEnds).toBe(2);
      // And it goes with the last unsubscribe.
      offLate();
      await waitFor(async () => (await listeningOn(p, channel)) === 0 && !(await backendAlive(kept!)), 10_000);
    }
  });

  it('a LISTEN connection lost after everyone left (its probe still under way) is news for nobody: no mode, no reconnect, and the connection destroyed', async () => {
    const p = pool();
    const { pool: through, seen, held: probe, probes } = firstProbeHeld(p);
    const { channel, notifications } = releaseNotifications(through, { probeTimeoutMs: 1000 });
    const early = listener();
    const off = await notifications.subscribe('a', early, 1);
    await waitFor(() => probes() === 1, 10_000);
    const [pid] = await listenersOn(p, channel);
    off();
    const errorsBefore = [...early.errors]; // the subscribe's own 'listen' timeout
    // The listener's own 'error' listener was added before the probe was sent: ours runs after it.
    let heard = false;
    seen.clients[0]!.on('error', () => void (heard = true));
    await p.query('SELECT pg_terminate_backend($1)', [pid]);
    await waitFor(() => heard, 10_000);
    expect(notifications.mode).toBeUndefined();
    probe.open();
    await waitFor(() => p.totalCount - p.idleCount === 0, 10_000);
    // The first reconnect of a loss that was taken as news would come 50 ms after it.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(seen.connects).toBe(1);
    expect(notifications.mode).toBeUndefined();
    expect(early.errors).toEqual(errorsBefore);
    expect(early.modes).toEqual([]);
  });

  it('a LISTEN connection lost while its probe is under way: reported once, LISTEN back on the next connection, and the lost probe’s silence blames nothing', async () => {
    const p = pool();
    let probes = 0;
    // The first probe's NOTIFY carries another payload: it is sent and answered, and never heard.
    const { pool: through, seen } = steered(p, { poolQuery: (text, values) => (text.includes('pg_notify') && ++probes === 1 ? [values![0], ':probe:unheard'] : values) });
    // Long enough that the reconnect comes first even on a starved machine (it takes ~100 ms here).
    const probeTimeoutMs = 5000;
    const { channel, notifications } = releaseNotifications(through, { probeTimeoutMs });
    const a = listener();
    const subscribed = notifications.subscribe('a', a, 10_000);
    await waitFor(() => seen.poolAnswers === 1, 10_000);
    const firstProbeSent = performance.now();
    const [lost] = await listenersOn(p, channel);
    await p.query('SELECT pg_terminate_backend($1)', [lost]);
    // The reconnect (50 ms later) LISTENs and proves it while the first probe still waits.
    await waitFor(() => notifications.mode === 'notify', 10_000);
    const reconnectedAfterMs = performance.now() - firstProbeSent;
    expect(reconnectedAfterMs, 'the reconnect came before the first probe gave up (else this test shows nothing)').toBeLessThan(probeTimeoutMs);
    // The first probe gives up at 5 s: a loss reported already, not a LISTEN that does not deliver.
    await new Promise((resolve) => setTimeout(resolve, probeTimeoutMs - reconnectedAfterMs + 500));
    stoppers.push(await subscribed);
    expect(a.modes).toEqual([
      ['polling', 'the LISTEN connection is down; reconnecting'],
      ['notify', 'LISTEN in place'],
    ]);
    expect(notifications.mode).toBe('notify');
    expect(a.errors).toHaveLength(1);
    expect(seen.connects).toBe(2);
    // Nothing of the proven probe outlives it: the connection's one listener is the listener's own.
    expect(seen.clients[1]!.listenerCount('notification')).toBe(1);
    await p.query('SELECT pg_notify($1, $2)', [channel, 'a']);
    await waitFor(() => a.releases === 1, 10_000);
  });

  it('a look under way when LISTEN comes back is the last: polling stops', async () => {
    let reachable = false;
    let holdNextLook = false;
    let heldLook = false;
    const inFlight = gate();
    let looks = 0;
    const { pool: through } = steered(pool(), {
      connected: () => {
        if (!reachable) throw new Error('connection refused (steered by the test)');
      },
    });
    const { notifications } = releaseNotifications(through, {
      pollMs: 20,
      pollFree: async () => {
        looks++;
        if (holdNextLook && !heldLook) {
          // A look of the polling loop (nothing else looks while LISTEN is down), held while the
          // database comes back and LISTEN is put in place.
          heldLook = true;
          reachable = true;
          await inFlight.promise;
        }
        return [];
      },
    });
    const h = listener();
    stoppers.push(await notifications.subscribe('a', h, 10_000));
    await waitFor(() => looks >= 2, 10_000);
    holdNextLook = true;
    await waitFor(() => heldLook && notifications.mode === 'notify', 10_000);
    inFlight.open();
    // The held look ends; no other is scheduled (the reconnect's own look is one more at most).
    const after = looks;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(looks - after).toBeLessThanOrEqual(1);
    expect(notifications.mode).toBe('notify');
  });

  it('a lease unsubscribed while a look is under way is passed over when the look answers it free; the others are woken', async () => {
    const look = gate<readonly string[]>();
    let looks = 0;
    const { notifications } = releaseNotifications(pool(), {
      listen: 'poll',
      pollMs: 20,
      pollFree: async () => (++looks === 1 ? look.promise : []),
    });
    const [a, b] = [listener(), listener()];
    const offA = await notifications.subscribe('a', a, 10_000);
    stoppers.push(await notifications.subscribe('b', b, 10_000));
    await waitFor(() => looks === 1, 10_000);
    offA();
    look.open(['a', 'b']);
    await waitFor(() => b.releases === 1, 10_000);
    expect(a.releases).toBe(0);
  });

  it('a subscribe whose database does not answer resolves at its timeout, telling the subscriber why', async () => {
    // A connection that opens and then hears nothing (a frozen server behind a live address).
    const proxy = await startFaultProxy(Number(new URL(testDatabaseUrl()).port || 5432));
    stoppers.push(() => proxy.close());
    proxy.setMode({ kind: 'drop' });
    const url = new URL(testDatabaseUrl());
    url.port = String(proxy.port);
    const { notifications } = releaseNotifications(pool(url.toString()));
    const h = listener();
    stoppers.push(await notifications.subscribe('a', h, 300));
    expect(h.errors[0]).toMatchObject({ name: 'TimeoutError', message: 'listen timed out after 300 ms' });
  });
});
