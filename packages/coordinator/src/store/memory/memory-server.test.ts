import { setImmediate as nextTurn } from 'node:timers/promises';
import { MAX_TOKEN, type Token } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { MemoryLeaseServer, type MemoryElection } from './memory-server.js';

// The in-memory lease server's own promises, below the lease store built on it (whose conformance
// suite runs in test/lease-store): its clock, expiry at the instant a lease ends, the last token,
// the elections it keeps, its release listeners, lease groups, and a failover's copy. Written for
// the survivors of its StrykerJS run (docs/planted-bugs.md).

/** A server on a clock the test moves. */
function serverAt(start: number): { server: MemoryLeaseServer; clock: { now: number } } {
  const clock = { now: start };
  return { server: new MemoryLeaseServer({ now: () => clock.now }), clock };
}

const valueOf = (token: Token) => `node-1:${token}`;

/** Grants `lease` and releases it, then waits the turn in which its listeners hear of it. */
async function grantAndRelease(server: MemoryLeaseServer, lease: string): Promise<void> {
  server.free(lease, server.grant(lease, 1000, valueOf)!.value);
  await nextTurn();
}

describe('the in-memory lease server', () => {
  it('tells its time as Redis TIME does: whole seconds and the microseconds past them', () => {
    const { server } = serverAt(1_700_000_123_456);
    expect(server.time()).toEqual({ sec: 1_700_000_123, usec: 456_000 });
  });

  it('ends a lease at the instant its time runs out, not a millisecond later', () => {
    const { server, clock } = serverAt(10_000);
    const granted = server.grant('a', 1000, valueOf)!;
    clock.now = 10_999;
    expect(server.holder('a')).toEqual({ value: granted.value, token: granted.token, remainingMs: 1 });
    clock.now = 11_000;
    expect(server.holder('a')).toBeNull();
    expect(server.extend('a', granted.value, 1000)).toBe(false);
    expect(server.grant('a', 1000, valueOf)?.token).toBe(2n);
  });

  it('mints the last token there is, then refuses the next grant with a RangeError and changes nothing', () => {
    const { server } = serverAt(0);
    server.raiseCounter('a', (MAX_TOKEN - 1n) as Token);
    const last = server.grant('a', 1000, valueOf)!;
    expect(last.token).toBe(MAX_TOKEN);
    expect(server.free('a', last.value)).toBe(true);
    expect(() => server.grant('a', 1000, valueOf)).toThrow(new RangeError('the token counter of a is at 2^63 - 1'));
    expect(server.holder('a')).toBeNull();
    // The counter did not move: raised to the top again, it is already there.
    server.raiseCounter('a', MAX_TOKEN);
    expect(() => server.grant('a', 1000, valueOf)).toThrow(RangeError);
  });

  it('frees nothing, and says so, for a lease nobody holds', () => {
    const { server } = serverAt(0);
    expect(server.free('never-held', 'node-1:1')).toBe(false);
    const granted = server.grant('a', 1000, valueOf)!;
    expect(server.free('a', 'node-2:1')).toBe(false);
    expect(server.holder('a')?.value).toBe(granted.value);
  });

  it('keeps the last 32 elections of each lease, oldest first, and none for a lease never elected', () => {
    const { server } = serverAt(0);
    const election = (lease: string, n: number): MemoryElection => ({ lease, token: BigInt(n) as Token, nodeId: `node-${n}`, ttlMs: 1000, fences: 0, regressed: false, at: n });
    expect(server.elections('a')).toEqual([]);
    for (let n = 1; n <= 33; n++) server.recordElection(election('a', n));
    server.recordElection(election('b', 1));
    expect(server.elections('a').map((e) => e.token)).toEqual(Array.from({ length: 32 }, (_, i) => BigInt(i + 2)));
    expect(server.elections('b')).toEqual([election('b', 1)]);
    // A copy: what the caller does with it does not reach the server.
    (server.elections('b') as MemoryElection[]).pop();
    expect(server.elections('b')).toHaveLength(1);
  });

  it('names every lease it has seen, sorted', () => {
    const { server } = serverAt(0);
    expect(server.leaseNames()).toEqual([]);
    server.grant('zeta', 1000, valueOf);
    server.grant('alpha', 1000, valueOf);
    server.holder('mid');
    expect(server.leaseNames()).toEqual(['alpha', 'mid', 'zeta']);
  });

  it('wakes every listener of a lease on its release; one that unsubscribed is not woken, the others still are', async () => {
    const { server } = serverAt(0);
    const heard: string[] = [];
    const offFirst = server.listen('a', () => heard.push('first'));
    server.listen('a', () => heard.push('second'));
    server.listen('b', () => heard.push('other lease'));
    await grantAndRelease(server, 'a');
    expect(heard.sort()).toEqual(['first', 'second']);
    heard.length = 0;
    offFirst();
    await grantAndRelease(server, 'a');
    expect(heard).toEqual(['second']);
  });

  it('an unsubscribe called twice takes away no listener that came after it', async () => {
    const { server } = serverAt(0);
    const heard: string[] = [];
    const off = server.listen('a', () => heard.push('first'));
    off();
    server.listen('a', () => heard.push('later'));
    off();
    await grantAndRelease(server, 'a');
    expect(heard).toEqual(['later']);
  });

  it("a lease group's beat says when the first other member expires, whatever order they beat in", () => {
    const { server, clock } = serverAt(0);
    server.beat('long-first', 'long', 3000);
    server.beat('long-first', 'short', 1000);
    expect(server.beat('long-first', 'me', 5000)).toEqual({ members: ['long', 'me', 'short'], nextExpiryMs: 1000 });
    server.beat('short-first', 'short', 1000);
    server.beat('short-first', 'long', 3000);
    expect(server.beat('short-first', 'me', 5000)).toEqual({ members: ['long', 'me', 'short'], nextExpiryMs: 1000 });
    // A member is off the list at the instant its time runs out.
    clock.now = 1000;
    expect(server.beat('long-first', 'me', 5000)).toEqual({ members: ['long', 'me'], nextExpiryMs: 2000 });
    expect(server.beat('alone', 'me', 5000)).toEqual({ members: ['me'], nextExpiryMs: -1 });
  });

  it('lets a member leave a group it never joined, or one that does not exist', () => {
    const { server } = serverAt(0);
    expect(() => server.leave('no-such-group', 'me')).not.toThrow();
    server.beat('g', 'other', 1000);
    server.leave('g', 'me');
    expect(server.beat('g', 'me', 1000).members).toEqual(['me', 'other']);
  });

  it('fails over to a snapshot whole: its leases, fire logs and group members come back as they were, and what came after is lost', () => {
    const { server } = serverAt(0);
    const held = server.grant('a', 10_000, valueOf)!;
    expect(server.writeFireLog('a', held.value, () => new Map([['last', '100']]))).toBe(true);
    server.beat('g', 'member', 10_000);
    const snapshot = server.snapshot();
    // Written after the snapshot: lost by the failover.
    expect(server.writeFireLog('a', held.value, () => new Map([['last', '200'], ['later', 'x']]))).toBe(true);
    server.beat('g', 'late', 10_000);
    server.free('a', held.value);
    server.grant('a', 10_000, valueOf);
    server.failOver(snapshot);
    expect(server.holder('a')).toEqual({ value: held.value, token: held.token, remainingMs: 10_000 });
    expect(server.fireLog('a')).toEqual({ last: '100' });
    expect(server.beat('g', 'me', 10_000).members).toEqual(['me', 'member']);
    // The snapshot shares nothing with the server: a second failover to it finds it as it was taken.
    server.writeFireLog('a', held.value, () => new Map([['last', '300']]));
    server.failOver(snapshot);
    expect(server.fireLog('a')).toEqual({ last: '100' });
    expect(server.beat('g', 'me', 10_000).members).toEqual(['me', 'member']);
  });
});
