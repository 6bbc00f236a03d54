// A lease group's stop() hands its leases to the others at once, and takes the member off the list for
// good. The others take them as soon as they hear the releases: the member leaves the list before it
// releases, and a member that hears a release of a lease it does not own looks at the list again then
// (not at its next heartbeat, up to a renew interval later). A heartbeat that leaves before the
// stop and reaches the store after the leave (another pooled connection, another stream) would put it
// back for a TTL, and the others would assign it leases it never takes, leaderless until it expires.
// On the in-memory store, whose requests can be given a travel time (requestDelayMs), so that the
// heartbeat in flight is applied after the leave unless stop() waits for it. The race with start()
// is in lease-group.test.ts, on Redis, whose release hub takes real time to open.
import { createLeaseGroup, type LeaseGroup } from '@fenced/coordinator';
import { createMemoryLeaseServer, memoryLeases, type MemoryLeaseServer, type MemoryLeasesOptions } from '@fenced/coordinator/memory';
import type { FencedEvent } from '@fenced/shared';
import { waitFor } from '#test-support';
import { expect, it, vi } from 'vitest';

it('leaves the member list only once a heartbeat in flight is answered, so that the leave is the last word', async () => {
  const server = createMemoryLeaseServer();
  // Each heartbeat of member x the store applied, in order.
  const applied: string[] = [];
  const beat = server.beat.bind(server);
  server.beat = (group, member, ttlMs) => {
    if (member === 'x') applied.push(member);
    return beat(group, member, ttlMs);
  };
  let group: LeaseGroup | undefined;
  let stopping: Promise<void> | undefined;
  let beats = 0;
  const store = memoryLeases({
    server,
    requestDelayMs: (operation) => {
      // The second heartbeat (the first one of the heartbeat timer) travels 30 ms, and the member is
      // stopped 5 ms after it left.
      if (operation !== 'heartbeat' || ++beats !== 2) return 0;
      setTimeout(() => void (stopping = group!.stop()), 5);
      return 30;
    },
  });
  group = createLeaseGroup({ store, group: 'g', leases: ['a', 'b'], ttlMs: 2000, renewIntervalMs: 50, nodeId: 'x' });
  await group.start();
  await waitFor(() => stopping !== undefined, 10_000, 5);
  await stopping;
  // Both heartbeats reached the store before the leave: the stop waited for the one in flight.
  await waitFor(() => applied.length === 2, 10_000, 5);
  expect(server.beat('g', 'y', 2000).members).toEqual(['y']);
});

it('a stop and a start while a start is still under way: the later start runs, once, and after the last stop nothing beats and no release hub is left open', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  try {
    const server = createMemoryLeaseServer();
    let beats = 0;
    const beat = server.beat.bind(server);
    server.beat = (group, member, ttlMs) => {
      if (member === 'x') beats++;
      return beat(group, member, ttlMs);
    };
    // Each release hub the group opens, and how many it closed. A hub takes 10 ms to open, as a
    // subscriber connection does on Redis: the first start's hub opens after the second start began.
    const store = memoryLeases({ server });
    const hubs = { opened: 0, closed: 0 };
    const openReleaseHub = store.openReleaseHub.bind(store);
    const counted = {
      ...store,
      openReleaseHub: async (...args: Parameters<typeof store.openReleaseHub>) => {
        await new Promise((resolve) => setTimeout(resolve, 10));
        const hub = await openReleaseHub(...args);
        hubs.opened++;
        return { ...hub, close: () => (hubs.closed++, hub.close()) };
      },
    };
    const group = createLeaseGroup({ store: counted, group: 'g', leases: ['a', 'b'], ttlMs: 2000, renewIntervalMs: 100, nodeId: 'x' });
    // Stopped (and done stopping) while the first start's hub opens, then started again: both hubs
    // open after that, the first one's for a start that no longer runs.
    const first = group.start();
    await group.stop();
    const second = group.start();
    await vi.advanceTimersByTimeAsync(50);
    await Promise.all([first, second]);
    // One heartbeat chain: ten renew intervals, ten heartbeats (and the start's own).
    const before = beats;
    await vi.advanceTimersByTimeAsync(1000);
    expect(beats - before).toBe(10);
    expect(group.led()).toEqual(['a', 'b']);
    await group.stop();
    const atStop = beats;
    await vi.advanceTimersByTimeAsync(1000);
    expect(beats).toBe(atStop);
    expect(server.beat('g', 'y', 2000).members).toEqual(['y']);
    expect(hubs.opened).toBeGreaterThan(0);
    expect(hubs.closed).toBe(hubs.opened);
  } finally {
    vi.useRealTimers();
  }
});

it.each([
  { case: 'with no heartbeat in flight', beatReplyMs: 0 },
  { case: "with the other's heartbeat in flight (sent before the leave: it beats again once answered)", beatReplyMs: 10 },
])("a member's graceful stop: the others take its leases as they hear the releases, not at their next heartbeat, $case", async ({ beatReplyMs }) => {
  // Every timer virtual, the store's next-turn replies (setImmediate) too, so that what happens in a
  // stretch of virtual time happens in order within it.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date', 'performance'] });
  try {
    const server = createMemoryLeaseServer();
    const member = (nodeId: string, delays: Pick<MemoryLeasesOptions, 'replyDelayMs' | 'requestDelayMs'>) =>
      createLeaseGroup({ store: memoryLeases({ server, ...delays }), group: 'g', shards: 4, ttlMs: 3000, renewIntervalMs: 1000, nodeId });
    // Once armed, b's next heartbeat takes beatReplyMs to answer, and a stops 2 ms after it went
    // out: b's next regular heartbeat is a renew interval away.
    let stopAfterBeat: (() => void) | undefined;
    // a's leave takes 5 ms to reach the store: released before it, its leases would be heard of
    // (and b would look at the list) while the list still named a.
    const a = member('a', { requestDelayMs: (operation) => (operation === 'leave' ? 5 : 0) });
    const b = member('b', {
      replyDelayMs: (operation) => {
        if (operation !== 'heartbeat' || stopAfterBeat === undefined) return 0;
        setTimeout(stopAfterBeat, 2);
        stopAfterBeat = undefined;
        return beatReplyMs;
      },
    });
    const started = Promise.all([a.start(), b.start()]);
    // Balanced once each has seen the other in two heartbeats.
    await vi.advanceTimersByTimeAsync(3000);
    await started;
    expect([a.led().length, b.led().length]).toEqual([2, 2]);
    let stopping: Promise<void> | undefined;
    stopAfterBeat = () => void (stopping = a.stop());
    for (let ms = 0; stopping === undefined && ms < 2000; ms++) await vi.advanceTimersByTimeAsync(1);
    await vi.advanceTimersByTimeAsync(5 + 2 * beatReplyMs + 20);
    await stopping;
    expect(b.led()).toEqual(['g-0', 'g-1', 'g-2', 'g-3']);
    const stopped = b.stop();
    await vi.advanceTimersByTimeAsync(20);
    await stopped;
  } finally {
    vi.useRealTimers();
  }
});

it('a stop and a start while the first start\'s heartbeat is in flight: that start begins no election, the later one begins them all, once', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date', 'performance'] });
  try {
    const server = createMemoryLeaseServer();
    let group: LeaseGroup | undefined;
    let second: Promise<void> | undefined;
    let beats = 0;
    const store = memoryLeases({
      server,
      // The first heartbeat takes 10 ms to answer, and 2 ms after it went out the member is stopped
      // and started again.
      replyDelayMs: (operation) => {
        if (operation !== 'heartbeat' || ++beats !== 1) return 0;
        setTimeout(() => {
          void group!.stop();
          second = group!.start();
        }, 2);
        return 10;
      },
    });
    // The subscriptions each release hub served, in the order the hubs opened.
    const listens: number[] = [];
    const openReleaseHub = store.openReleaseHub.bind(store);
    const counted = {
      ...store,
      openReleaseHub: async (...args: Parameters<typeof store.openReleaseHub>) => {
        const hub = await openReleaseHub(...args);
        const i = listens.push(0) - 1;
        return { ...hub, listen: (...listenArgs: Parameters<typeof hub.listen>) => (listens[i]!++, hub.listen(...listenArgs)) };
      },
    };
    group = createLeaseGroup({ store: counted, group: 'g', leases: ['a', 'b'], ttlMs: 2000, renewIntervalMs: 100, nodeId: 'x' });
    const first = group.start();
    await vi.advanceTimersByTimeAsync(100);
    await Promise.all([first, second]);
    // The stop closed the first hub: a lease subscribing to it would be listening to nothing.
    expect(listens).toEqual([0, 2]);
    expect(group.led()).toEqual(['a', 'b']);
    const stopped = group.stop();
    await vi.advanceTimersByTimeAsync(20);
    await stopped;
  } finally {
    vi.useRealTimers();
  }
});

/** Counts the release subscriptions open on `server`. */
function countSubscriptions(server: MemoryLeaseServer): { readonly open: number } {
  const count = { open: 0 };
  const listen = server.listen.bind(server);
  server.listen = (lease, onRelease) => {
    const unsubscribe = listen(lease, onRelease);
    count.open++;
    return () => (count.open--, unsubscribe());
  };
  return count;
}

it("a stop and a start while the leases subscribe: each lease subscribes on the new start's hub at once, and nothing is reported", async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date', 'performance'] });
  try {
    const server = createMemoryLeaseServer();
    const subscriptions = countSubscriptions(server);
    // The first start's two subscriptions take 30 ms to reach the store: the member is stopped and
    // started again meanwhile, and the stop closes the hub they were being made on. Every election
    // takes 100 ms: the new start's is still in flight when the old subscriptions fail.
    let listens = 0;
    const store = memoryLeases({ server, requestDelayMs: (operation) => (operation === 'listen' && ++listens <= 2 ? 30 : operation === 'acquire' ? 100 : 0) });
    const failures: FencedEvent[] = [];
    const group = createLeaseGroup({ store, group: 'g', leases: ['a', 'b'], ttlMs: 2000, renewIntervalMs: 1000, nodeId: 'x', logger: (e) => void (e.type === 'lease-store.error' && failures.push(e)) });
    const first = group.start();
    await vi.advanceTimersByTimeAsync(5);
    expect(listens).toBe(2);
    const stopped = group.stop();
    const second = group.start();
    // Subscribed as soon as the old subscriptions failed, before the elections in flight end: a lease
    // left without one would make it again only at its next attempt or renewal, and hear no release
    // until then.
    await vi.advanceTimersByTimeAsync(60);
    expect(failures).toEqual([]);
    expect(subscriptions.open).toBe(2);
    await vi.advanceTimersByTimeAsync(200);
    await Promise.all([first, stopped, second]);
    expect(subscriptions.open).toBe(2);
    expect(group.led()).toEqual(['a', 'b']);
    // They were made on the second start's hub: its stop ends them.
    const last = group.stop();
    await vi.advanceTimersByTimeAsync(20);
    await last;
    expect(subscriptions.open).toBe(0);
  } finally {
    vi.useRealTimers();
  }
});

it('a release hub closed while a subscription is being made: the subscription ends too, and the listen says so', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
  try {
    const server = createMemoryLeaseServer();
    const subscriptions = countSubscriptions(server);
    const store = memoryLeases({ server, requestDelayMs: (operation) => (operation === 'listen' ? 30 : 0) });
    const hub = await store.openReleaseHub(1000, () => undefined);
    const listening = hub.listen('a', () => undefined);
    const settled = listening.then(() => 'subscribed', (error: unknown) => (error as Error).message);
    hub.close();
    await vi.advanceTimersByTimeAsync(50);
    expect(await settled).toBe("the release hub was closed while a's subscription was being made");
    expect(subscriptions.open).toBe(0);
  } finally {
    vi.useRealTimers();
  }
});
