// The scheduler keeps its books beside the lease (the fire record), and the store checks the lease
// in the same step as each record. When the store refuses a record as not the holder's, the term
// must end at the coordinator too: a store that failed over away from the lease and back to a copy
// that still holds it (an asynchronous replica) lets the next renew succeed, and a coordinator that
// kept leading after its scheduler stood down would dispatch nothing again, for as long as it renews.
// The deterministic simulation found this order (pnpm dst, seed 0x5eed08eb before the fix). And a
// term whose record cannot be read at its start (a store blip) asks again while it lasts, rather
// than leading without a scheduler. The app is the README's: a wrapped handler, nothing else.
import { createGuard } from '@fenced/consumer-guard';
import { createMemoryFenceDatabase, memoryFences } from '@fenced/consumer-guard/memory';
import { createCoordinator, createScheduler, fireId, type Coordinator } from '@fenced/coordinator';
import { createMemoryLeaseServer, memoryLeases, type MemoryLeaseServer } from '@fenced/coordinator/memory';
import { parseFireId, type FencedEvent } from '@fenced/shared';
import { failpoints } from '@fenced/shared/failpoints';
import { waitFor } from '#test-support';
import { afterEach, describe, expect, it } from 'vitest';

const EVERY_MS = 100;
const stoppers: Array<() => Promise<unknown> | void> = [];

afterEach(async () => {
  failpoints.disarm();
  for (const stop of stoppers.splice(0).reverse()) await stop();
});

/** One node of the README's app on the shared in-memory stores. */
async function setUp(leases: MemoryLeaseServer) {
  const database = createMemoryFenceDatabase();
  const guard = createGuard({ store: memoryFences({ database }), resource: 'ledger' });
  await guard.migrate();
  const handle = guard.wrapHandler(async (_payload, ctx) => ctx.guardedWrite(async (trx) => trx.insert('ledger', { fire: ctx.fireId, token: ctx.token })));
  const events: FencedEvent[] = [];
  const node = (nodeId: string): Coordinator => {
    const coordinator = createCoordinator({ store: memoryLeases({ server: leases }), lease: 'billing', nodeId, ttlMs: 600, renewIntervalMs: 150, fences: [guard], logger: (e) => events.push(e) });
    const scheduler = createScheduler({ coordinator, jobs: { invoices: { everyMs: EVERY_MS, handler: (envelope) => handle(envelope) } }, logger: (e) => events.push(e) });
    stoppers.push(() => coordinator.stop(), () => scheduler.stop());
    scheduler.start();
    return coordinator;
  };
  const ledger = () => database.rows('ledger') as ReadonlyArray<{ fire: string; token: bigint }>;
  /** Every fire due from `from` to the latest one applied took effect, each once. */
  const noneLostFrom = async (from: number) => {
    const until = Math.max(...ledger().map((row) => parseFireId(row.fire)!.scheduledAt));
    const due: string[] = [];
    for (let at = from; at <= until; at += EVERY_MS) due.push(fireId('invoices', at));
    await waitFor(() => due.every((id) => ledger().some((row) => row.fire === id)), 10_000);
    const fires = ledger().map((row) => row.fire);
    expect(new Set(fires).size).toBe(fires.length);
  };
  return { events, node, ledger, noneLostFrom };
}

describe('a term whose fire record the lease store refuses', () => {
  it('ends at the coordinator too, so that a store failed back to a copy that holds the lease loses no fire', async () => {
    const leases = createMemoryLeaseServer();
    const empty = leases.snapshot();
    const { events, node, ledger, noneLostFrom } = await setUp(leases);
    const a = node('a');
    await a.start();
    await waitFor(() => ledger().length >= 3, 10_000);
    const firstFire = Math.min(...ledger().map((row) => parseFireId(row.fire)!.scheduledAt));
    const tokenThen = a.token();

    // A fire applied and not yet recorded: the store fails over to an empty replica, and refuses the
    // record; then it fails over again, to a copy taken just before, in which A still holds the lease.
    let held: ReturnType<MemoryLeaseServer['snapshot']> | undefined;
    failpoints.arm('scheduler.dispatched-before-record', {
      kind: 'call',
      run: () => {
        held = leases.snapshot();
        leases.failOver(empty);
      },
    });
    const writeFireLog = leases.writeFireLog.bind(leases);
    let refusals = 0;
    leases.writeFireLog = (lease, value, fields) => {
      const written = writeFireLog(lease, value, fields);
      if (!written && held !== undefined && refusals++ === 0) leases.failOver(held);
      return written;
    };
    await waitFor(() => refusals > 0, 10_000);

    // A's renew finds its lease in the store again; its term ends all the same, and a term after it
    // goes on with the fires, the one whose record was refused among them.
    await waitFor(() => ledger().some((row) => row.token > tokenThen!), 10_000);
    expect(events.filter((e) => e.type === 'lease.lost').map((e) => e.type === 'lease.lost' && `${e.nodeId}@${e.token}: ${e.reason}`)).toEqual([`a@${tokenThen}: stolen`]);
    await noneLostFrom(firstFire);
  });

  it('and a term whose record cannot be read at its start asks again while it lasts, and loses no fire', async () => {
    const leases = createMemoryLeaseServer();
    // The first two reads of the record fail (the store blinks as the term begins).
    const fireLog = leases.fireLog.bind(leases);
    let failures = 0;
    leases.fireLog = (lease) => {
      if (failures < 2) {
        failures++;
        throw new Error('the lease store blinked');
      }
      return fireLog(lease);
    };
    const { events, node, ledger } = await setUp(leases);
    const a = node('a');
    await a.start();
    await waitFor(() => ledger().length >= 3, 10_000);
    expect(failures).toBe(2);
    expect(events.filter((e) => e.type === 'lease-store.error' && e.operation === 'load fires')).toHaveLength(2);
    // The same term, never given up.
    expect(new Set(ledger().map((row) => row.token))).toEqual(new Set([a.token()]));
    expect(events.some((e) => e.type === 'lease.lost')).toBe(false);
  });
});
