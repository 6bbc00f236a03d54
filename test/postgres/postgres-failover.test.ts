// A PostgreSQL failover under the PostgreSQL lease store: a real streaming replica (asynchronous),
// the primary frozen with SIGSTOP, the replica promoted, the service address moved to it, and the
// old primary resumed with pooled connections still open to it, still believing it is the primary.
// What must hold: no lease is granted on the deposed primary (the store's primary confirmation), its
// leader ends its term, and the new primary refuses the old term's writes (the fence).
import pg from 'pg';
import { isFencedError, parseToken, type FencedEvent } from '@fenced/shared';
import { createCoordinator, type Coordinator } from '@fenced/coordinator';
import { postgresLeases } from '@fenced/coordinator/postgres';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { startFaultProxy, startPostgresServer, type FaultProxy, type PostgresServerProcess } from '@fenced/chaos';
import { waitFor } from '#test-support';
import { afterAll, describe, expect, it } from 'vitest';

const pools: pg.Pool[] = [];
const coordinators: Coordinator[] = [];
const servers: PostgresServerProcess[] = [];
const proxies: FaultProxy[] = [];

/** A pool that keeps its connections (they stay on the server they reached), errors reported, not thrown. */
function pool(connectionString: string, max = 4): pg.Pool {
  const p = new pg.Pool({ connectionString, max, idleTimeoutMillis: 0, connectionTimeoutMillis: 3000 });
  p.on('error', () => undefined); // a connection to a server that went away; the next query says so
  pools.push(p);
  return p;
}

/** Opens every connection of `p` now, so that all of them reach the server the address points at today. */
async function warm(p: pg.Pool, max = 4): Promise<void> {
  const clients = await Promise.all(Array.from({ length: max }, () => p.connect()));
  for (const c of clients) c.release();
}

/**
 * A primary, its streaming replica, and the service address clients connect to (a proxy in front
 * of the primary, moved to the replica at the failover), with a pool per member for the confirmation.
 */
async function cluster() {
  const primary = await startPostgresServer();
  servers.push(primary);
  const standby = await startPostgresServer({ replicaOf: primary });
  servers.push(standby);
  const service = await startFaultProxy(primary.port);
  proxies.push(service);
  const url = `postgres://postgres@127.0.0.1:${service.port}/postgres`;
  /** Until the replica has replayed everything the primary wrote so far. */
  const replicated = async () => {
    const [{ lsn }] = (await pool(primary.url, 1).query('SELECT pg_current_wal_lsn()::text AS lsn')).rows as [{ lsn: string }];
    const replica = pool(standby.url, 1);
    await waitFor(async () => ((await replica.query('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS caught_up', [lsn])).rows[0] as { caught_up: boolean }).caught_up, 10_000, 20);
  };
  return { primary, standby, service, url, members: [pool(primary.url, 2), pool(standby.url, 2)], replicated };
}

afterAll(async () => {
  for (const s of servers) s.resume(); // a failed test may leave one frozen: nothing could end its sessions
  await Promise.all(coordinators.map((c) => c.stop().catch(() => undefined)));
  await Promise.all(pools.map((p) => p.end().catch(() => undefined)));
  await Promise.all(proxies.map((p) => p.close()));
  await Promise.all(servers.map((s) => s.stop()));
});

// A third of the TTL per command: a frozen member costs each confirmation round that much.
const options = { lease: 'billing', ttlMs: 3000, renewIntervalMs: 500 } as const;

/** The store's grants refused as coming from a deposed primary, per node. */
const refusals = (events: readonly FencedEvent[], operation: string) =>
  events.filter((e): e is Extract<FencedEvent, { type: 'lease-store.error' }> => e.type === 'lease-store.error' && e.store === 'postgres' && e.operation === operation && /deposed primary/.test(String((e.error as Error).message)));

describe('PostgreSQL failover with the lease in PostgreSQL', () => {
  it('grants nothing on the deposed primary once it resumes (a control without the confirmation does lead there), and the new primary refuses the old term', async () => {
    const { primary, standby, service, url, members, replicated } = await cluster();
    const events: FencedEvent[] = [];
    const logger = (e: FencedEvent) => events.push(e);
    const old = pool(url);
    await warm(old);
    const oldGuard = createPostgresGuard({ db: old, resource: 'ledger' });
    await oldGuard.migrate();
    const oldLeases = postgresLeases({ pool: old, listen: 'poll', confirmPrimary: { members }, logger });
    await oldLeases.migrate();
    const a = createCoordinator({ ...options, store: oldLeases, nodeId: 'a', fences: [oldGuard], logger });
    coordinators.push(a);
    await a.start();
    await waitFor(() => a.isLeader(), 10_000);
    const oldToken = a.token()!;
    await replicated();

    // The failover: the primary frozen, its replica promoted, the service address moved to it.
    primary.pause();
    await standby.promote();
    service.retarget(standby.port, { reset: false }); // the connections open now stay on the old primary
    const fresh = pool(url);
    const newGuard = createPostgresGuard({ db: fresh, resource: 'ledger' });
    const b = createCoordinator({ ...options, store: postgresLeases({ pool: fresh, listen: 'poll', confirmPrimary: { members }, logger }), nodeId: 'b', fences: [newGuard], logger });
    coordinators.push(b);
    await b.start();
    // The replica's copy of the lease runs out by its own clock: b is elected there, above a's token.
    await waitFor(() => b.isLeader(), 20_000);
    expect(b.token()!).toBeGreaterThan(oldToken);
    // a's renews went to the frozen primary: its term ended by its own deadline.
    expect(a.isLeader()).toBe(false);

    // The old primary resumes, still a primary; a's pool and a newcomer's still reach it.
    primary.resume();
    const c = createCoordinator({ ...options, store: oldLeases, nodeId: 'c', fences: [oldGuard], logger });
    coordinators.push(c);
    await c.start();
    const refused = (node: string) => refusals(events, 'acquire').some((e) => e.nodeId === node);
    // Both try on the deposed primary, which grants them the lease it still has; each grant is refused.
    await waitFor(() => refused('a') && refused('c'), 20_000);
    expect(a.isLeader() || c.isLeader()).toBe(false);
    expect(b.isLeader()).toBe(true);
    const acquiredOnOld = events.filter((e) => e.type === 'lease.acquired' && e.nodeId !== 'b');
    expect(acquiredOnOld).toEqual([expect.objectContaining({ nodeId: 'a', token: oldToken })]);

    // The old term's write, sent to the new primary, is refused there: nothing applied.
    let error: unknown;
    await newGuard.guardedWrite(parseToken(oldToken), async () => undefined).catch((err: unknown) => (error = err));
    expect(isFencedError(error, 'STALE_TOKEN')).toBe(true);

    // The control: the same store without the confirmation is granted the lease on the deposed
    // primary. What the test above saw refused was a real grant there, not a connection that missed it.
    const unconfirmed = createCoordinator({ ...options, store: postgresLeases({ pool: old, listen: 'poll' }), nodeId: 'd', fences: [oldGuard] });
    coordinators.push(unconfirmed);
    await Promise.all([a.stop(), c.stop()]);
    await unconfirmed.start();
    await waitFor(() => unconfirmed.isLeader(), 20_000);
  }, 120_000);

  it('ends the term of a leader whose primary was deposed under it (its replica promoted while it still answers): its renewals there do not count', async () => {
    const { standby, url, members, replicated } = await cluster();
    const events: FencedEvent[] = [];
    const logger = (e: FencedEvent) => events.push(e);
    const old = pool(url);
    await warm(old);
    const guard = createPostgresGuard({ db: old, resource: 'ledger' });
    await guard.migrate();
    const leases = postgresLeases({ pool: old, listen: 'poll', confirmPrimary: { members }, logger });
    await leases.migrate();
    const a = createCoordinator({ ...options, store: leases, nodeId: 'a', fences: [guard], logger });
    coordinators.push(a);
    await a.start();
    await waitFor(() => a.isLeader(), 10_000);
    await replicated();
    // A mistaken failover (the replica lost sight of the primary for a moment): two primaries now,
    // and a's connections, all of them, on the old one, which renews a's lease as before.
    await standby.promote();
    await waitFor(() => !a.isLeader(), 10_000);
    expect(refusals(events, 'renew').length).toBeGreaterThan(0);
    expect(events).toContainEqual(expect.objectContaining({ type: 'lease.lost', nodeId: 'a', reason: 'deadline' }));
    // And it is not elected there again.
    const since = events.length;
    await waitFor(() => refusals(events.slice(since), 'acquire').length >= 2, 20_000);
    expect(a.isLeader()).toBe(false);
  }, 120_000);
});
