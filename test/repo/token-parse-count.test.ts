import { createGuard } from '@fenced/consumer-guard';
import { createCoordinator, createScheduler } from '@fenced/coordinator';
import type { Envelope } from '@fenced/shared';
import { createRedis, createTestSchema, deleteKeys, uniquePrefix, waitFor } from '#test-support';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

// The token is parsed once, at the edge where it arrives (the envelope), and travels as a branded
// `Token` from there: no layer below parses it again. Counted on the parser itself: every module
// that imports token.ts (the envelope, the guards, the coordinator) gets this counting copy.
const parses = vi.hoisted(() => ({ count: 0 }));
vi.mock('../../packages/shared/src/token.ts', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../packages/shared/src/token.ts')>();
  // Each of these parses its argument (validates a value of unknown shape), so each call counts.
  // (formatToken is not among them: it takes a Token, already valid, and only prints it.)
  const counted = <A extends unknown[], R>(fn: (...args: A) => R) => (...args: A): R => {
    parses.count++;
    return fn(...args);
  };
  const wrapped: Record<string, unknown> = { ...original };
  for (const name of ['parseToken', 'isToken'] as const) {
    if (name in original) wrapped[name] = counted(original[name] as (...args: unknown[]) => unknown);
  }
  return wrapped;
});

const stoppers: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const stop of stoppers.splice(0).reverse()) await stop();
});
beforeEach(() => {
  parses.count = 0;
});

describe('the token is parsed once', () => {
  it('once per wrapped-handler call, on the combined guard with its Redis fast path', async () => {
    const { name: schema, pool, drop } = await createTestSchema('parse_count');
    stoppers.push(drop);
    const redis = createRedis();
    stoppers.push(() => redis.disconnect());
    const prefix = uniquePrefix('parse-count');
    stoppers.push(() => deleteKeys(redis, prefix));
    const guard = createGuard({ db: pool, redis, schema, resource: 'ledger', keyPrefix: prefix });
    await guard.migrate();
    const handle = guard.wrapHandler(async (_payload, ctx) => ctx.guardedWrite(async (client) => client.query('SELECT 1')));
    // One call first, so that whatever is done once per resource (the first fence, the first mark)
    // is out of the count.
    await handle(envelopeFor(1, 5n));

    const calls = 20;
    parses.count = 0;
    for (let i = 2; i < 2 + calls; i++) expect((await handle(envelopeFor(i, 5n))).status).toBe('applied');
    expect(parses.count / calls).toBe(1);

    // A stale envelope is refused by Redis: still one parse.
    await handle(envelopeFor(100, 9n));
    parses.count = 0;
    expect((await guard.wrapHandler(async () => 'ran', { onStale: 'return' })(envelopeFor(101, 5n))).status).toBe('stale');
    expect(parses.count).toBe(1);
  });

  it('none per scheduler fire: the leader dispatches the token its election minted', async () => {
    const redis = createRedis();
    stoppers.push(() => redis.disconnect());
    const prefix = uniquePrefix('parse-count-fire');
    stoppers.push(() => deleteKeys(redis, prefix));
    const fired: Envelope[] = [];
    const coordinator = createCoordinator({ redis, lease: 'parse-count', keyPrefix: prefix, ttlMs: 3000, renewIntervalMs: 1000 });
    const scheduler = createScheduler({ coordinator, tickMs: 5, jobs: { every: { everyMs: 50, handler: (envelope) => void fired.push(envelope) } } });
    stoppers.push(() => coordinator.stop());
    stoppers.push(() => scheduler.stop());
    scheduler.start();
    await coordinator.start();
    // Past the election (which reads the minted token off the script's reply: that is an edge).
    await waitFor(() => fired.length >= 1, 20_000);
    const before = { parses: parses.count, fires: fired.length };
    await waitFor(() => fired.length >= before.fires + 10, 20_000);
    await scheduler.stop();
    // Renewals read no token; any parse counted here came from a fire.
    expect({ parses: parses.count - before.parses, term: coordinator.currentTerm()?.token }).toEqual({ parses: 0, term: BigInt(fired.at(-1)!.token) });
  });
});

function envelopeFor(n: number, token: bigint): Envelope {
  return {
    v: 1,
    job: 'invoices',
    fireId: `invoices@${n}`,
    scheduledAt: new Date(Date.UTC(2026, 11, 1) + n * 1000).toISOString(),
    token: token.toString(),
    issuer: 'node-a',
    payload: null,
  };
}
