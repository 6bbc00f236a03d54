// The etcd lease store at its edges, below the conformance suite: what a refusal says of the
// holder's time, each request of a stalled member naming itself, a base that keeps moving under the
// grant or the counter's repair, a session whose etcd lease is gone as the key is written, the
// in-flight hook of a retried grant, a release in one request, the election record's trim, and a
// renew whose session is gone or whose read fails. Written for the survivors of its StrykerJS runs
// (docs/planted-bugs.md). Faults are a fault proxy in front of the test cluster's first member
// (stalled: nothing passes until it is let go), or another writer on the same keys, through a client
// that acts just before a request.
import { parseToken, isFencedError } from '@fenced/shared';
import { startFaultProxy, type FaultProxy } from '@fenced/chaos';
import { etcdLeases } from '@fenced/coordinator/etcd';
import { etcdTestScope, resultWithin, testEtcdEndpoints, waitFor } from '#test-support';
import type { Etcd3 } from 'etcd3';
import { describe, expect, it } from 'vitest';

const { prefix, stoppers, admin, client } = etcdTestScope('store');
let n = 0;

/** A client whose requests go through a fault proxy, and the proxy (let go at the end, then closed). */
async function proxied(): Promise<{ client: Etcd3; proxy: FaultProxy }> {
  const proxy = await startFaultProxy(Number(new URL(testEtcdEndpoints()[0]!).port));
  stoppers.push(() => proxy.close());
  const through = client([`http://127.0.0.1:${proxy.port}`]);
  stoppers.push(() => proxy.setMode({ kind: 'pass' }));
  return { client: through, proxy };
}

/**
 * `real` with hooks run before each of its key-value transactions and reads is sent and once its
 * reply is in, and one run before a keep-alive stream is opened: another process, or a fault, acting
 * then.
 */
function withHooks(
  real: Etcd3,
  hooks: { beforeTxn?: (request: Parameters<Etcd3['kv']['txn']>[0]) => Promise<void>; afterTxn?: () => void; beforeRange?: () => Promise<void>; afterRange?: () => void; beforeKeepAlive?: () => Promise<void> },
): Etcd3 {
  const kv = new Proxy(real.kv, {
    get: (on, key) =>
      key === 'txn'
        ? async (...args: Parameters<Etcd3['kv']['txn']>) => {
            await hooks.beforeTxn?.(args[0]);
            const reply = await on.txn(...args);
            hooks.afterTxn?.();
            return reply;
          }
        : key === 'range'
          ? async (...args: Parameters<Etcd3['kv']['range']>) => {
              await hooks.beforeRange?.();
              const reply = await on.range(...args);
              hooks.afterRange?.();
              return reply;
            }
          : Reflect.get(on, key),
  });
  const leaseClient = new Proxy(real.leaseClient, {
    get: (on, key) => (key === 'leaseKeepAlive' ? async (...args: Parameters<Etcd3['leaseClient']['leaseKeepAlive']>) => (await hooks.beforeKeepAlive?.(), on.leaseKeepAlive(...args)) : Reflect.get(on, key)),
  });
  return new Proxy(real, { get: (on, key) => (key === 'kv' ? kv : key === 'leaseClient' ? leaseClient : Reflect.get(on, key)) });
}

describe('the etcd lease store, acquiring', () => {
  it("answers a refusal with the holder's time left on its etcd lease, in ms", async () => {
    const name = `held-${++n}`;
    const won = await etcdLeases({ client: client(), prefix }).openLease(name, 'node-a', 6000).acquire(6000, 5000);
    if (!won.won) throw new Error('not granted');
    const refused = await etcdLeases({ client: client(), prefix }).openLease(name, 'node-b', 6000).acquire(6000, 5000);
    expect(refused).toMatchObject({ won: false, holder: { token: won.token, ours: false } });
    if (refused.won) throw new Error('granted twice');
    // etcd counts the TTL in whole seconds: at most the six granted, and most of them still left.
    expect(refused.remainingMs).toBeGreaterThan(2000);
    expect(refused.remainingMs).toBeLessThanOrEqual(6000);
  });

  it("answers a refusal whose holder's time could not be read (the member stalled after the write) as no time left, not as a failure", async () => {
    const name = `unread-${++n}`;
    const won = await etcdLeases({ client: client(), prefix }).openLease(name, 'node-a', 6000).acquire(6000, 5000);
    if (!won.won) throw new Error('not granted');
    const { client: through, proxy } = await proxied();
    const stalling = withHooks(through, { afterTxn: () => proxy.setMode({ kind: 'stall' }) });
    const refused = await etcdLeases({ client: stalling, prefix }).openLease(name, 'node-b', 6000).acquire(6000, 1000);
    expect(refused).toMatchObject({ won: false, holder: { token: won.token }, remainingMs: 0 });
  });

  it('keeps to its budget across its requests: a slow session grant leaves the write only what is left', async () => {
    const { client: through, proxy } = await proxied();
    // Connected first: gRPC's own handshake is not what is slowed.
    await through.get(`${prefix}warm`).string();
    proxy.setMode({ kind: 'delay', delayMs: 3000, only: 'replies' });
    const hooked = withHooks(through, { beforeTxn: async () => proxy.setMode({ kind: 'stall' }) });
    const started = performance.now();
    const error = await etcdLeases({ client: hooked, prefix }).openLease(`budget-${++n}`, 'node-a', 5000).acquire(5000, 3500).catch((err: unknown) => err);
    const tookMs = performance.now() - started;
    expect(error).toMatchObject({ code: 'LEASE_STORE_UNAVAILABLE', reason: 'timeout', message: expect.stringMatching(/^etcd: acquire failed/) });
    // It waited for the grant (3 s), then the write had what was left of 3.5 s, not 3.5 s more.
    expect(tookMs).toBeGreaterThanOrEqual(3000);
    expect(tookMs, `the acquire took ${Math.round(tookMs)} ms of a 3500 ms budget`).toBeLessThan(5000);
  });

  it('a write that a stalled member never answers fails as the acquire, naming the transaction, without starting a session over', async () => {
    const { client: through, proxy } = await proxied();
    const store = etcdLeases({ client: through, prefix });
    // A session first (its etcd lease granted and kept alive), then the member stops answering.
    expect((await store.openLease(`first-${++n}`, 'node-a', 5000).acquire(5000, 5000)).won).toBe(true);
    proxy.setMode({ kind: 'stall' });
    const error = await store.openLease(`stalled-${++n}`, 'node-a', 5000).acquire(5000, 500).catch((err: unknown) => err);
    expect(isFencedError(error, 'LEASE_STORE_UNAVAILABLE')).toBe(true);
    expect(error).toMatchObject({ store: 'etcd', reason: 'timeout', message: expect.stringMatching(/^etcd: acquire failed \(timeout\): .*etcd txn/) });
  });

  it('a release of a term this store did not grant reads the key first: on a stalled member that read fails, naming itself', async () => {
    const name = `ungranted-${++n}`;
    const won = await etcdLeases({ client: client(), prefix }).openLease(name, 'node-a', 5000).acquire(5000, 5000);
    if (!won.won) throw new Error('not granted');
    const { client: through, proxy } = await proxied();
    // The same node's store in another process (a restart): it holds no record of the grant.
    const other = etcdLeases({ client: through, prefix }).openLease(name, 'node-a', 5000);
    proxy.setMode({ kind: 'stall' });
    const error = await other.release(won.leaseValue, 500).catch((err: unknown) => err);
    expect(error).toMatchObject({ code: 'LEASE_STORE_UNAVAILABLE', reason: 'timeout', message: expect.stringMatching(/^etcd: read lease failed \(timeout\)/) });
    proxy.setMode({ kind: 'pass' });
    // Read, it is this node's term: released.
    expect(await other.release(won.leaseValue, 5000)).toBe(true);
  });

  it('gives up, granting nothing, when the base moves under each of its three tries (a counter repair racing it)', async () => {
    const name = `moving-${++n}`;
    let bumps = 0;
    // Another process writes the lease's base just before each transaction: the one the grant
    // compares is never the one there.
    const moving = withHooks(client(), { beforeTxn: async () => void (await admin().put(`${prefix}base/${name}`).value(String(++bumps))) });
    const acquired = etcdLeases({ client: moving, prefix }).openLease(name, 'node-a', 5000).acquire(5000, 5000);
    const reply = await resultWithin(acquired, 10_000, 'still trying after 10 s');
    expect(reply).toMatchObject({ won: false, holder: null, remainingMs: 0 });
    expect(bumps).toBe(3);
    const key = await admin().get(`${prefix}lease/${name}`).string();
    expect(key).toBeNull();
  });

  it("grants nothing when the session's etcd lease is gone as the key is written (the keep-alive finds it expired)", async () => {
    const name = `expired-${++n}`;
    let written: Promise<unknown> = Promise.resolve();
    let revoke = true;
    const real = client();
    const hooked = withHooks(real, {
      // The first keep-alive of the grant waits for its write, then finds its etcd lease revoked (as
      // if it had expired in between): the key, attached to it, is gone with it.
      beforeTxn: async () => {
        written = new Promise((resolve) => setTimeout(resolve, 200));
      },
      beforeKeepAlive: async () => {
        if (!revoke) return;
        revoke = false;
        await written;
        const [lease] = (await admin().get(`${prefix}lease/${name}`).exec()).kvs;
        if (lease === undefined) throw new Error('the grant wrote no key');
        await admin().leaseClient.leaseRevoke({ ID: lease.lease });
      },
    });
    const reply = await etcdLeases({ client: hooked, prefix }).openLease(name, 'node-a', 5000).acquire(5000, 5000);
    expect(reply).toMatchObject({ won: false, holder: null, remainingMs: 0 });
  });

  it("tries a new session when the write finds its session's etcd lease gone, three times at most, then fails as the acquire", async () => {
    const name = `revoked-${++n}`;
    let revoked = 0;
    // Another process revokes the etcd lease each write is attached to, just before it is sent (as
    // if each session had expired between its keep-alive and the write).
    const revoking = withHooks(client(), {
      beforeTxn: async (request) => {
        const lease = request.success?.[0]?.request_put?.lease;
        if (lease === undefined) return;
        revoked++;
        await admin().leaseClient.leaseRevoke({ ID: lease });
      },
    });
    const error = await etcdLeases({ client: revoking, prefix }).openLease(name, 'node-a', 5000).acquire(5000, 5000).catch((err: unknown) => err);
    expect(error).toMatchObject({ code: 'LEASE_STORE_UNAVAILABLE', store: 'etcd', message: expect.stringMatching(/^etcd: acquire failed /) });
    expect(revoked).toBe(3);
    expect(await admin().get(`${prefix}lease/${name}`).string()).toBeNull();
  });

  it('runs the in-flight hook (where failpoints stop) once per acquire, not again for a retry after the base moved', async () => {
    const name = `hooked-${++n}`;
    const lease = etcdLeases({ client: client(), prefix }).openLease(name, 'node-a', 5000);
    // A base exists (a counter repair ran): the first try compares none and reads it, the second wins.
    await lease.raiseCounter(parseToken(1_000_000n), 5000);
    let calls = 0;
    const reply = await lease.acquire(5000, 5000, async () => void calls++);
    expect(reply.won && reply.token > 1_000_000n).toBe(true);
    expect(calls).toBe(1);
  });
});

describe('the etcd lease store, recording elections', () => {
  /** The tokens of a lease's election record, oldest first, and each entry as written. */
  async function recorded(name: string): Promise<{ tokens: number[]; entries: Array<Record<string, unknown>> }> {
    const all = await admin().getAll().prefix(`${prefix}elections/${name}/`).strings();
    const keys = Object.keys(all).sort();
    return { tokens: keys.map((key) => Number(key.split('/').at(-1))), entries: keys.map((key) => JSON.parse(all[key]!) as Record<string, unknown>) };
  }

  it("records each election under its token and keeps the lease's newest 32, another lease's record untouched", async () => {
    const name = `record-${++n}`;
    const beside = `record-${++n}`;
    etcdLeases({ client: client(), prefix }).openLease(beside, 'node-b', 5000).recordElection({ token: parseToken(1n), ttlMs: 4000, fences: 1, regressed: false });
    await waitFor(async () => (await recorded(beside)).tokens.length === 1, 10_000);
    const lease = etcdLeases({ client: client(), prefix }).openLease(name, 'node-a', 5000);
    const before = Date.now();
    for (let token = 1; token <= 34; token++) lease.recordElection({ token: parseToken(BigInt(token)), ttlMs: 5000, fences: 2, regressed: token === 34 });
    const newest = Array.from({ length: 32 }, (_, i) => i + 3);
    await waitFor(async () => (await recorded(name)).tokens.join() === newest.join(), 10_000);
    const { entries } = await recorded(name);
    expect(entries.at(-1)).toEqual({ token: '34', nodeId: 'node-a', ttlMs: 5000, fences: 2, regressed: true, at: expect.any(Number) });
    expect(entries[0]).toMatchObject({ token: '3', regressed: false });
    expect(entries.at(-1)!['at']).toBeGreaterThanOrEqual(before);
    // The trim stays within the lease's own record.
    expect((await recorded(beside)).tokens).toEqual([1]);
  });
});

describe('the etcd lease store, recording elections without a trim', () => {
  it('sends no delete while the record holds 32 elections or fewer', async () => {
    const name = `record-full-${++n}`;
    const requests: string[] = [];
    let ranged!: () => void;
    let rangedOnce = new Promise<void>((resolve) => (ranged = resolve));
    const real = client();
    const kv = new Proxy(real.kv, {
      get: (on, key) => {
        const value = Reflect.get(on, key) as unknown;
        if (typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          requests.push(String(key));
          const reply = await (value as (...a: unknown[]) => Promise<unknown>).apply(on, args);
          if (key === 'range') ranged();
          return reply;
        };
      },
    });
    const lease = etcdLeases({ client: new Proxy(real, { get: (on, key) => (key === 'kv' ? kv : Reflect.get(on, key)) }), prefix }).openLease(name, 'node-a', 5000);
    for (let token = 1; token <= 32; token++) {
      lease.recordElection({ token: parseToken(BigInt(token)), ttlMs: 5000, fences: 1, regressed: false });
      // Each record's writes and its look at the record done, and the turns after it, where a delete would go.
      await rangedOnce;
      rangedOnce = new Promise<void>((resolve) => (ranged = resolve));
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    }
    expect(requests.filter((r) => r === 'deleteRange')).toEqual([]);
    expect((await admin().getAll().prefix(`${prefix}elections/${name}/`).keys()).length).toBe(32);
  });
});

describe('the etcd lease store, releasing and repairing the counter', () => {
  /** `real`, counting the key-value requests it sends (reads and transactions alike). */
  function counting(real: Etcd3): { client: Etcd3; requests: string[] } {
    const requests: string[] = [];
    const kv = new Proxy(real.kv, {
      get: (on, key) => {
        const value = Reflect.get(on, key) as unknown;
        return typeof value === 'function' ? (...args: unknown[]) => (requests.push(String(key)), (value as (...a: unknown[]) => unknown).apply(on, args)) : value;
      },
    });
    return { client: new Proxy(real, { get: (on, key) => (key === 'kv' ? kv : Reflect.get(on, key)) }), requests };
  }

  it('releases a term it granted in one request, the delete compared with the key as written', async () => {
    const { client: counted, requests } = counting(client());
    const lease = etcdLeases({ client: counted, prefix }).openLease(`one-trip-${++n}`, 'node-a', 5000);
    const won = await lease.acquire(5000, 5000);
    if (!won.won) throw new Error('not granted');
    requests.length = 0;
    expect(await lease.release(won.leaseValue, 5000)).toBe(true);
    expect(requests).toEqual(['txn']);
  });

  it('a release that a stalled member never answers fails naming the release', async () => {
    const { client: through, proxy } = await proxied();
    const lease = etcdLeases({ client: through, prefix }).openLease(`stalled-release-${++n}`, 'node-a', 5000);
    const won = await lease.acquire(5000, 5000);
    if (!won.won) throw new Error('not granted');
    proxy.setMode({ kind: 'stall' });
    const error = await lease.release(won.leaseValue, 500).catch((err: unknown) => err);
    expect(error).toMatchObject({ code: 'LEASE_STORE_UNAVAILABLE', reason: 'timeout', message: expect.stringMatching(/^etcd: release failed \(timeout\)/) });
  });

  it('a counter repair raises a base that is already there (a second repair) in one read and one write', async () => {
    const name = `repair-twice-${++n}`;
    const { client: counted, requests } = counting(client());
    const lease = etcdLeases({ client: counted, prefix }).openLease(name, 'node-a', 5000);
    await lease.raiseCounter(parseToken(1_000_000n), 5000);
    requests.length = 0;
    await lease.raiseCounter(parseToken(2_000_000n), 5000);
    expect(requests).toEqual(['txn', 'txn']);
    const won = await lease.acquire(5000, 5000);
    expect(won.won && won.token > 2_000_000n).toBe(true);
  });

  it.each([
    ['read of the base', 'read base', (request: Parameters<Etcd3['kv']['txn']>[0]) => request.compare === undefined && request.success?.[0]?.request_range !== undefined],
    ['write of the base', 'raise counter', (request: Parameters<Etcd3['kv']['txn']>[0]) => request.compare?.[0]?.target === 'Mod'],
  ])('a counter repair whose %s fails names it', async (_step, operation, failing) => {
    const cut = withHooks(client(), {
      beforeTxn: async (request) => {
        if (failing(request)) throw new Error('cut off');
      },
    });
    const error = await etcdLeases({ client: cut, prefix }).openLease(`repair-cut-${++n}`, 'node-a', 5000).raiseCounter(parseToken(1_000_000n), 5000).catch((err: unknown) => err);
    expect(error).toMatchObject({ code: 'LEASE_STORE_UNAVAILABLE', store: 'etcd', message: expect.stringMatching(new RegExp(`^etcd: ${operation} failed .*cut off`)) });
  });

  it('a counter repair compares the base it read: when the base moves under each of its three tries, it fails naming itself and writes nothing', async () => {
    const name = `repair-moving-${++n}`;
    let bumps = 0;
    // Another process writes the base between the repair's read and its write, every time.
    const moving = withHooks(client(), {
      beforeTxn: async (request) => {
        if (request.compare?.[0]?.target !== 'Mod') return;
        await admin().put(`${prefix}base/${name}`).value(String(++bumps));
      },
    });
    const repair = etcdLeases({ client: moving, prefix }).openLease(name, 'node-a', 5000).raiseCounter(parseToken(1_000_000n), 5000);
    const error = await resultWithin(repair.then(() => 'raised', (err: unknown) => err), 10_000, 'still trying after 10 s');
    expect(error).toMatchObject({ code: 'LEASE_STORE_UNAVAILABLE', store: 'etcd', message: expect.stringMatching(/^etcd: raise counter failed .*the base kept moving under the repair/) });
    expect(bumps).toBe(3);
    expect(await admin().get(`${prefix}base/${name}`).string()).toBe('3');
  });
});

describe('the etcd lease store, renewing', () => {
  /** The etcd lease a lease's key is attached to (the session it was granted on). */
  async function sessionOf(name: string): Promise<string> {
    const [kv] = (await admin().get(`${prefix}lease/${name}`).exec()).kvs;
    if (kv === undefined) throw new Error(`${name} has no key`);
    return kv.lease;
  }

  it("is not renewed when its keep-alive finds the session's etcd lease gone, though its read still saw the key; the term is forgotten, so its release reads the key first", async () => {
    const name = `renew-expired-${++n}`;
    let armed = false;
    let read!: () => void;
    const readDone = new Promise<void>((resolve) => (read = resolve));
    const requests: string[] = [];
    // The renew's read of the key goes first and sees it; then, before the keep-alive is sent, the
    // session's etcd lease goes (as if it had expired in between).
    const hooked = withHooks(client(), {
      beforeTxn: async () => void (armed && requests.push('txn')),
      afterRange: () => armed && read(),
      beforeKeepAlive: async () => {
        if (!armed) return;
        await readDone;
        await admin().leaseClient.leaseRevoke({ ID: await sessionOf(name) });
      },
    });
    const lease = etcdLeases({ client: hooked, prefix }).openLease(name, 'node-a', 5000);
    const won = await lease.acquire(5000, 5000);
    if (!won.won) throw new Error('not granted');
    armed = true;
    expect(await lease.renew(won.leaseValue, 5000, () => 5000)).toMatchObject({ renewed: false });
    // Granted no more: a release of that term reads the key (gone with the etcd lease) and sends no delete.
    requests.length = 0;
    expect(await lease.release(won.leaseValue, 5000)).toBe(false);
    expect(requests).toEqual([]);
  });

  it('is not renewed when its key, as written, is no longer on its session (put again without the etcd lease: it would outlive the term)', async () => {
    const name = `renew-detached-${++n}`;
    const lease = etcdLeases({ client: client(), prefix }).openLease(name, 'node-a', 5000);
    const won = await lease.acquire(5000, 5000);
    if (!won.won) throw new Error('not granted');
    // The same value, put again with no etcd lease: its creation revision and value are the term's still.
    const value = await admin().get(`${prefix}lease/${name}`).string();
    await admin().put(`${prefix}lease/${name}`).value(value!);
    expect(await lease.renew(won.leaseValue, 5000, () => 5000)).toMatchObject({ renewed: false });
  });

  it('a renew whose read of the key fails names the read, not the keep-alive', async () => {
    const name = `renew-read-${++n}`;
    let failReads = false;
    const failing = withHooks(client(), {
      beforeRange: async () => {
        if (failReads) throw new Error('the read was cut off');
      },
    });
    const lease = etcdLeases({ client: failing, prefix }).openLease(name, 'node-a', 5000);
    const won = await lease.acquire(5000, 5000);
    if (!won.won) throw new Error('not granted');
    failReads = true;
    const error = await lease.renew(won.leaseValue, 5000, () => 5000).catch((err: unknown) => err);
    expect(error).toMatchObject({ code: 'LEASE_STORE_UNAVAILABLE', store: 'etcd', message: expect.stringMatching(/^etcd: read lease failed .*the read was cut off/) });
  });

  it("a renew on a session already found gone answers not renewed at once, sending nothing (another lease of the same session found it)", async () => {
    const { client: through, proxy } = await proxied();
    const store = etcdLeases({ client: through, prefix });
    const first = store.openLease(`renew-dead-a-${++n}`, 'node-a', 5000);
    const second = store.openLease(`renew-dead-b-${n}`, 'node-a', 5000);
    const [a, b] = await Promise.all([first.acquire(5000, 5000), second.acquire(5000, 5000)]);
    if (!a.won || !b.won) throw new Error('not granted');
    // One session for both: revoked, the first renew finds it gone.
    await admin().leaseClient.leaseRevoke({ ID: await sessionOf(`renew-dead-a-${n}`) });
    expect(await first.renew(a.leaseValue, 5000, () => 5000)).toMatchObject({ renewed: false });
    // Nothing passes the proxy now: a request would wait out the renew's time and fail it.
    proxy.setMode({ kind: 'stall' });
    expect(await second.renew(b.leaseValue, 3000, () => 3000)).toMatchObject({ renewed: false });
  });
});
