import { setImmediate as nextTurn } from 'node:timers/promises';
import { parseToken } from '@fenced/shared';
import { describe, expect, it, vi } from 'vitest';
import { memoryLeases } from './memory-backend.js';
import { createMemoryLeaseServer } from './memory-server.js';

// The in-memory lease store's own promises, above the server it shares with other processes and
// below the lease-store conformance suite (test/lease-store): its replies come a turn of the event
// loop later, or after the delay the caller names per operation; once closed it refuses every
// request and hears no release. Written for the survivors of its StrykerJS run (docs/planted-bugs.md).

describe('the in-memory lease store', () => {
  it('names each request by its operation to the reply delay, and waits that long before it answers', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const asked: string[] = [];
      const store = memoryLeases({
        replyDelayMs: (operation) => {
          asked.push(operation);
          return operation === 'acquire' ? 50 : 0;
        },
      });
      const lease = store.openLease('billing', 'n1', 1000);
      let answered = false;
      const acquired = lease.acquire(1000, 1000).then((reply) => ((answered = true), reply));
      await nextTurn();
      await nextTurn();
      expect(answered).toBe(false);
      await vi.advanceTimersByTimeAsync(50);
      const reply = await acquired;
      expect(reply.won).toBe(true);
      if (!reply.won) throw new Error('not granted');
      // No delay: the next turn of the event loop, with no timer to wait for.
      expect(await lease.renew(reply.leaseValue, 1000, () => 1000)).toMatchObject({ renewed: true });
      await lease.raiseCounter(parseToken(5n), 1000);
      const listener = await lease.listenForReleases(1000, () => undefined, () => undefined);
      expect(await lease.release(reply.leaseValue, 1000)).toBe(true);
      listener.close();
      const members = store.membership('workers');
      await members.beat('m1', 1000, 1000);
      await members.leave('m1', 1000);
      expect(await store.configProblem(1000)).toBe(null);
      const hub = await store.openReleaseHub(1000, () => undefined);
      (await hub.listen('billing', () => undefined))();
      hub.close();
      expect(asked).toEqual(['acquire', 'renew', 'raise counter', 'listen', 'release', 'heartbeat', 'leave', 'config', 'listen']);
    } finally {
      vi.useRealTimers();
    }
  });

  it('once closed, refuses every request as unreachable, naming the operation, records no election, and hears no release it had not yet been told of', async () => {
    const server = createMemoryLeaseServer();
    const store = memoryLeases({ server });
    expect(store.kind).toBe('memory');
    const lease = store.openLease('billing', 'n1', 1000);
    const modes: Array<[string, string]> = [];
    let heard = 0;
    await lease.listenForReleases(1000, () => void heard++, () => undefined, (mode, reason) => void modes.push([mode, reason]));
    expect(modes).toEqual([['notify', 'in memory: a release is heard on the next turn of the event loop']]);
    // Listening with no one to tell how.
    await lease.listenForReleases(1000, () => undefined, () => undefined);
    lease.recordElection({ token: parseToken(1n), ttlMs: 1000, fences: 2, regressed: false });
    expect(server.elections('billing')).toEqual([{ lease: 'billing', nodeId: 'n1', token: 1n, ttlMs: 1000, fences: 2, regressed: false, at: expect.any(Number) }]);
    // Released by another process, and closed in the same turn, before the notice is delivered.
    server.free('billing', server.grant('billing', 1000, (token) => `other:${token}`)!.value);
    store.close();
    await nextTurn();
    await nextTurn();
    expect(heard).toBe(0);
    lease.recordElection({ token: parseToken(2n), ttlMs: 1000, fences: 0, regressed: false });
    expect(server.elections('billing')).toHaveLength(1);
    await expect(lease.acquire(1000, 1000)).rejects.toMatchObject({ code: 'LEASE_STORE_UNAVAILABLE', store: 'memory', reason: 'unreachable', message: expect.stringContaining('acquire: the store was closed') });
  });

  it("reads a holder whose value is not a lease value this library wrote as somebody else's, not as a failure", async () => {
    const server = createMemoryLeaseServer();
    server.grant('billing', 1000, () => 'written by hand');
    const reply = await memoryLeases({ server }).openLease('billing', 'n1', 1000).acquire(1000, 1000);
    expect(reply).toMatchObject({ won: false, holder: { value: 'written by hand', ours: false } });
  });

  it('applies a request only once it has travelled its request delay, so that requests sent in one order can be applied in another, even after the sender closed', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const server = createMemoryLeaseServer();
      const asked: string[] = [];
      const store = memoryLeases({
        server,
        requestDelayMs: (operation) => {
          asked.push(operation);
          return operation === 'heartbeat' ? 30 : 0;
        },
      });
      const members = store.membership('workers');
      // The heartbeat is sent first and applied last: after the leave, and after the store closed.
      const beat = members.beat('m1', 1000, 1000);
      await members.leave('m1', 1000);
      expect(server.beat('workers', 'm2', 1000).members).toEqual(['m2']);
      store.close();
      await vi.advanceTimersByTimeAsync(29);
      expect(server.beat('workers', 'm2', 1000).members).toEqual(['m2']);
      await vi.advanceTimersByTimeAsync(1);
      expect((await beat).members).toEqual(['m1', 'm2']);
      expect(asked).toEqual(['heartbeat', 'leave']);
    } finally {
      vi.useRealTimers();
    }
  });
});
