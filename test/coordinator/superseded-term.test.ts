// A lease store that fails over to an asynchronous replica loses its latest writes: the grants it
// made and the token counter they advanced. A node granted a token before the loss can then raise
// the fences after the next leader's election (it was frozen before its own advance), and that
// leader, which holds the lease of the store as it is now and renews it, sees every write of its
// term refused as stale. The term must end and the lease be elected again above the fence; a
// scheduler that only stops dispatching the job loses every fire from then on (SPIN found this
// order in the protocol's model). The app is the README's: a wrapped handler, nothing else.
import { createGuard } from '@fenced/consumer-guard';
import { createMemoryFenceDatabase, memoryFences } from '@fenced/consumer-guard/memory';
import { createCoordinator, createScheduler, fireId, type Coordinator, type Scheduler } from '@fenced/coordinator';
import { createMemoryLeaseServer, memoryLeases } from '@fenced/coordinator/memory';
import { parseFireId, type FencedEvent } from '@fenced/shared';
import { failpoints } from '@fenced/shared/failpoints';
import { waitFor } from '#test-support';
import { afterEach, describe, expect, it } from 'vitest';

const EVERY_MS = 100;
const stoppers: Array<() => Promise<unknown> | void> = [];
/** Thaws what a test froze, so that a failed test's nodes can stop. */
const thaws: Array<() => void> = [];

afterEach(async () => {
  failpoints.disarm();
  for (const thaw of thaws.splice(0)) thaw();
  for (const stop of stoppers.splice(0).reverse()) await stop();
});

describe('a term whose writes a newer token fences out', () => {
  it('ends, and the lease is elected again above the fence: after a lossy failover no fire is lost', async () => {
    const leases = createMemoryLeaseServer();
    const database = createMemoryFenceDatabase();
    const guard = createGuard({ store: memoryFences({ database }), resource: 'ledger' });
    await guard.migrate();
    const handle = guard.wrapHandler(async (_payload, ctx) => ctx.guardedWrite(async (trx) => trx.insert('ledger', { fire: ctx.fireId, token: ctx.token })));
    const events: FencedEvent[] = [];
    const node = (nodeId: string): { coordinator: Coordinator; scheduler: Scheduler } => {
      const coordinator = createCoordinator({ store: memoryLeases({ server: leases }), lease: 'billing', nodeId, ttlMs: 600, renewIntervalMs: 150, fences: [guard], logger: (e) => events.push(e) });
      const scheduler = createScheduler({ coordinator, jobs: { invoices: { everyMs: EVERY_MS, handler: (envelope) => handle(envelope) } }, logger: (e) => events.push(e) });
      stoppers.push(() => coordinator.stop(), () => scheduler.stop());
      scheduler.start();
      return { coordinator, scheduler };
    };
    const ledger = () => database.rows('ledger') as ReadonlyArray<{ fire: string; token: bigint }>;

    // The replica's copy, taken before two grants it never sees.
    const replica = leases.snapshot();
    // Token 1: granted to a node that died before its election advanced any fence; its lease runs out.
    leases.grant('billing', 300, (token) => `${token}:crashed`);
    // Token 2: A wins once that lease is gone, and freezes before its election's fence advance.
    let thaw!: () => void;
    const thawed = new Promise<void>((resolve) => (thaw = resolve));
    thaws.push(() => thaw());
    let frozen = false;
    failpoints.arm('lease.acquired-before-dispatch', { kind: 'call', run: () => ((frozen = true), thawed) });
    const a = node('a');
    void a.coordinator.start();
    await waitFor(() => frozen, 10_000);

    // The failover: the store is back at counter 0, with no holder. B is elected with token 1 and writes.
    leases.failOver(replica);
    const b = node('b');
    await b.coordinator.start();
    await waitFor(() => b.coordinator.token() === 1n && ledger().filter((row) => row.token === 1n).length >= 3, 10_000);
    const firstOfB = Math.min(...ledger().map((row) => parseFireId(row.fire)!.scheduledAt));

    // A thaws: its advance to 2 succeeds (the fence holds 1), and every write of B's term is refused.
    thaw();
    await waitFor(() => events.some((e) => e.type === 'fire.stale' && e.token === 1n), 10_000);
    // B's term ends; the next election mints above the fence and the fires go on (3 is the first
    // token above it, once the counter is repaired).
    await waitFor(() => ledger().some((row) => row.token >= 3n), 10_000);
    expect(events.some((e) => e.type === 'lease.lost' && e.nodeId === 'b' && e.token === 1n && e.reason === 'superseded')).toBe(true);
    const leader = [a, b].find((n) => n.coordinator.isLeader());
    expect(leader?.coordinator.token()).toBeGreaterThanOrEqual(3n);

    // Nothing lost: every fire due since B's first write took effect once, those refused in B's term
    // by the next term's catch-up.
    const until = Math.max(...ledger().map((row) => parseFireId(row.fire)!.scheduledAt));
    const due: string[] = [];
    for (let at = firstOfB; at <= until; at += EVERY_MS) due.push(fireId('invoices', at));
    await waitFor(() => due.every((id) => ledger().some((row) => row.fire === id)), 10_000);
    const fires = ledger().map((row) => row.fire);
    expect(new Set(fires).size).toBe(fires.length);
  });
});
