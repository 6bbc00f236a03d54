import { startEtcdCluster, type EtcdCluster } from '@fenced/chaos';
import { createCoordinator, type Coordinator } from '@fenced/coordinator';
import { etcdLeases } from '@fenced/coordinator/etcd';
import { isFencedError, type Token } from '@fenced/shared';
import { createEtcdClient, waitFor } from '#test-support';
import type { Etcd3 } from 'etcd3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

// The etcd lease store under faults of the cluster itself, on a three-member cluster of its own
// (the shared one must stay whole for the other files): the etcd leader killed and frozen, a member
// cut off, quorum lost, a member replaced with an empty data directory. What must hold throughout:
// never two fenced leaders at once, every term's token above the last, and a leader that cannot
// renew ends its term by its own deadline.

const TTL = 2000;
let cluster: EtcdCluster;
const stoppers: Array<() => Promise<unknown> | void> = [];
let n = 0;

beforeAll(async () => {
  cluster = await startEtcdCluster();
});
afterEach(async () => {
  for (const stop of stoppers.splice(0).reverse()) await stop();
  // Every member back and the cluster whole before the next test.
  for (const m of cluster.members) {
    cluster.heal(m);
    m.resume();
    if (!m.running) await m.start();
  }
  await cluster.waitForLeader(60_000);
});
afterAll(async () => {
  await cluster.stop();
});

function client(): Etcd3 {
  const c = createEtcdClient(cluster.endpoints, { fastBreaker: true });
  stoppers.push(() => c.close());
  return c;
}

/** Three fenced nodes on one lease, each with a client of its own, watched every few milliseconds. */
async function election(lease = `fault-${++n}`) {
  const nodes: Coordinator[] = [];
  const tokens: Token[] = [];
  const lost: string[] = [];
  for (let i = 0; i < 3; i++) {
    const c = createCoordinator({ store: etcdLeases({ client: client(), prefix: 'fenced-faults/' }), lease, nodeId: `node-${i}`, ttlMs: TTL, renewIntervalMs: 400, acquireRetryMs: 200 });
    c.on('elected', ({ token }) => tokens.push(token));
    c.on('lost', ({ reason }) => lost.push(reason));
    c.on('error', () => {});
    stoppers.push(() => c.stop());
    nodes.push(c);
  }
  let most = 0;
  const sampler = setInterval(() => (most = Math.max(most, nodes.filter((c) => c.isLeader()).length)), 2);
  stoppers.push(() => clearInterval(sampler));
  await Promise.all(nodes.map((c) => c.start()));
  await waitFor(() => nodes.some((c) => c.isLeader()), 20_000);
  return {
    nodes,
    tokens,
    lost,
    leader: () => nodes.find((c) => c.isLeader()),
    mostAtOnce: () => most,
  };
}

const increasing = (tokens: readonly Token[]) => tokens.every((t, i) => i === 0 || t > tokens[i - 1]!);

describe('the etcd lease store under faults of the cluster', () => {
  it('the etcd leader killed (SIGKILL): one fenced leader at a time, and a term after the failover has a higher token', async () => {
    const e = await election();
    const before = e.tokens.length;
    const etcdLeader = await cluster.waitForLeader();
    await etcdLeader.kill();
    await cluster.waitForLeader(30_000);
    // Force a new term through the new etcd leader: the fenced leader steps down (on a loaded machine
    // its term may already have ended by its deadline during etcd's election; a new one must come).
    await e.leader()?.stop();
    await waitFor(() => e.tokens.length > before && e.leader() !== undefined, 30_000);
    expect(e.mostAtOnce()).toBe(1);
    expect(increasing(e.tokens)).toBe(true);
  });

  it('the etcd leader frozen (SIGSTOP) past its election timeout, then resumed: one fenced leader at a time, tokens increasing', async () => {
    const e = await election();
    const etcdLeader = await cluster.waitForLeader();
    etcdLeader.pause();
    await cluster.waitForLeader(30_000);
    await e.leader()?.stop();
    await waitFor(() => e.leader() !== undefined, 30_000);
    etcdLeader.resume();
    await waitFor(async () => (await cluster.statuses()).size === 3, 30_000, 100);
    expect(e.mostAtOnce()).toBe(1);
    expect(increasing(e.tokens)).toBe(true);
  });

  it('quorum lost (two of three down): the fenced leader ends its term by its deadline, nobody leads, typed errors; quorum back, a higher token leads', async () => {
    const e = await election();
    const tokenBefore = e.leader()!.token()!;
    const [a, b] = cluster.members;
    const errors: unknown[] = [];
    for (const c of e.nodes) c.on('error', (err) => errors.push(err));
    const downAt = performance.now();
    await Promise.all([a!.kill(), b!.kill()]);
    await waitFor(() => e.lost.includes('deadline'), 20_000);
    // Ended by its own deadline: within a TTL of the loss (the last renew was sent before it).
    expect(performance.now() - downAt).toBeLessThan(TTL + 2000);
    expect(e.leader()).toBeUndefined();
    // Nobody leads while there is no quorum: elections cannot be granted.
    const quietFrom = performance.now();
    await waitFor(() => performance.now() - quietFrom > TTL, TTL * 3, 50);
    expect(e.leader()).toBeUndefined();
    expect(errors.some((err) => isFencedError(err, 'LEASE_STORE_UNAVAILABLE'))).toBe(true);
    await Promise.all([a!.start(), b!.start()]);
    await cluster.waitForLeader(30_000);
    await waitFor(() => e.leader() !== undefined, 30_000);
    expect(e.leader()!.token()!).toBeGreaterThan(tokenBefore);
    expect(e.mostAtOnce()).toBe(1);
    expect(increasing(e.tokens)).toBe(true);
  });

  it('a member cut off behind its fault proxies: the clients move to the others, one fenced leader at a time', async () => {
    const e = await election();
    const errors: string[] = [];
    for (const c of e.nodes) c.on('error', (err: Error) => errors.push(`${c.nodeId}: ${err.message}`));
    const victim = cluster.members[0]!;
    cluster.partition(victim);
    await e.leader()?.stop();
    // The nodes' errors go with a failure, to say where they were stuck.
    await waitFor(() => e.leader() !== undefined, 30_000).catch((err: Error) => {
      throw new Error(`${err.message}; the nodes' last errors: ${errors.slice(-6).join(' | ') || 'none'}`);
    });
    cluster.heal(victim);
    expect(e.mostAtOnce()).toBe(1);
    expect(increasing(e.tokens)).toBe(true);
  });

  it('members restarted on their data directories and one replaced with an empty one: tokens never go back', async () => {
    const e = await election();
    for (const m of cluster.members) {
      await m.kill();
      await m.start();
      await cluster.waitForLeader(30_000);
    }
    await cluster.replaceWithEmptyDataDir(cluster.members[1]!);
    await cluster.waitForLeader(30_000);
    const before = e.tokens.length;
    await e.leader()?.stop();
    await waitFor(() => e.tokens.length > before && e.leader() !== undefined, 30_000);
    expect(e.mostAtOnce()).toBe(1);
    expect(increasing(e.tokens)).toBe(true);
  });

  it('a store request with no quorum is a typed error saying why', async () => {
    const [a, b] = cluster.members;
    await Promise.all([a!.kill(), b!.kill()]);
    const store = etcdLeases({ client: client(), prefix: 'fenced-faults/' }).openLease(`noquorum-${++n}`, 'node-x', 2000);
    const error = await store.acquire(2000, 2000).catch((err: unknown) => err);
    expect(isFencedError(error, 'LEASE_STORE_UNAVAILABLE')).toBe(true);
    expect((error as { reason: string }).reason).toMatch(/^(no-quorum|timeout|unreachable)$/);
  });
});
