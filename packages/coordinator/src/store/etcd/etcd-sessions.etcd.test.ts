import { countingEtcdClient, waitFor } from '#test-support';
import { afterEach, describe, expect, it } from 'vitest';
import { EtcdSessions } from './etcd-sessions.js';

// The safety of sharing a keep-alive: etcd counts a lease's new TTL from when its leader handles the
// keep-alive, so only renews asked for before it was sent may share it.

const stoppers: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const stop of stoppers.splice(0).reverse()) await stop();
});


describe('etcd sessions', () => {
  it('a keep-alive is shared only by renews asked for before it was sent', async () => {
    const { client: c, keepAlives } = countingEtcdClient(stoppers);
    const sessions = new EtcdSessions(c);
    const session = await sessions.session(5000, 5000);
    // Asked for in the same turn: one keep-alive serves both.
    await Promise.all([sessions.keepAlive(session, 5000), sessions.keepAlive(session, 5000)]);
    expect(keepAlives()).toBe(1);
    // The first is on its way when the second is asked for: etcd would count the lease's TTL from
    // before the second renew's send, so the second sends its own.
    const first = sessions.keepAlive(session, 5000);
    await waitFor(() => keepAlives() === 2, 5000, 1);
    const second = sessions.keepAlive(session, 5000);
    expect(await first).toBe(true);
    expect(await second).toBe(true);
    expect(keepAlives()).toBe(3);
    await sessions.revokeAll(5000);
  });

});
