// A coordinator's release subscription can fail as it starts (the store refusing connections for a
// moment, a partition): the election must go on without it, and the subscription be made again once
// the store answers. Once, a failed subscription rejected start() and left the lease never competed
// for, even after the store came back (the deterministic simulation of the lease group found it: a
// member restarted while cut off from the store). On the in-memory store, whose server is told to
// refuse the first subscription.
import { createCoordinator, type Coordinator } from '@fenced/coordinator';
import { createMemoryLeaseServer, memoryLeases } from '@fenced/coordinator/memory';
import { LeaseStoreUnavailableError, type FencedEvent } from '@fenced/shared';
import { afterEach, expect, it, vi } from 'vitest';

afterEach(() => void vi.useRealTimers());

it('a subscription that fails at start: start() resolves, the failure is reported, the node competes and leads, and subscribes again at its first renewal', async () => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date', 'performance'] });
  const server = createMemoryLeaseServer();
  // The subscriptions open on the server; the first one asked for, the start's, is refused (and its
  // first attempt, right after, does not ask again: one outage, one report).
  let open = 0;
  let refuse = 1;
  const listen = server.listen.bind(server);
  server.listen = (lease, onRelease) => {
    if (refuse-- > 0) throw new LeaseStoreUnavailableError('memory', 'unreachable', 'listen: refused', { cause: undefined });
    const unsubscribe = listen(lease, onRelease);
    open++;
    return () => (open--, unsubscribe());
  };
  const node = (nodeId: string): { coordinator: Coordinator; events: FencedEvent[]; errors: Error[] } => {
    const events: FencedEvent[] = [];
    const errors: Error[] = [];
    const coordinator = createCoordinator({ store: memoryLeases({ server }), lease: 'billing', nodeId, ttlMs: 10_000, renewIntervalMs: 1_000, logger: (e) => events.push(e) });
    coordinator.on('error', (error) => errors.push(error));
    return { coordinator, events, errors };
  };
  // a's subscriptions are refused; it competes anyway, and leads.
  const a = node('a');
  const started = a.coordinator.start();
  await vi.advanceTimersByTimeAsync(10);
  await expect(started).resolves.toBeUndefined();
  expect(a.errors.map((e) => e.message)).toEqual(['memory: listen: refused']);
  expect(a.events).toContainEqual(expect.objectContaining({ type: 'lease-store.error', operation: 'subscribe' }));
  expect(a.coordinator.isLeader()).toBe(true);
  expect(open).toBe(0);
  // At its first renewal the store answers again: it subscribes then, so that it hears releases the
  // moment its term ends.
  await vi.advanceTimersByTimeAsync(1_500);
  expect(open).toBe(1);
  // b stands by; a stops and releases: b, woken by the release, takes the lease at once.
  const b = node('b');
  const bStarted = b.coordinator.start();
  await vi.advanceTimersByTimeAsync(10);
  await bStarted;
  expect(b.coordinator.isLeader()).toBe(false);
  expect(open).toBe(2);
  const aStopped = a.coordinator.stop();
  await vi.advanceTimersByTimeAsync(20);
  await aStopped;
  expect(b.coordinator.isLeader()).toBe(true);
  expect(open).toBe(1);
  const bStopped = b.coordinator.stop();
  await vi.advanceTimersByTimeAsync(20);
  await bStopped;
  expect(open).toBe(0);
});
