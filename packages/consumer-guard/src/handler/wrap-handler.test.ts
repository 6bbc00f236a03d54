import { createGuard } from '@fenced/consumer-guard';
import { createMemoryFenceDatabase, memoryFences, type MemoryTransaction } from '@fenced/consumer-guard/memory';
import { createEnvelope, isFencedError, parseToken, signEnvelope, type Envelope, type FencedEvent } from '@fenced/shared';
import { inMemoryMetrics } from '#test-support';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { idempotencyKey } from './wrap-handler.js';

// The handler wrapper against its own promise, on the in-memory fence store (the PostgreSQL file
// beside this one runs it on a real database with the Redis fast path): what a handler is given, what
// each refusal resolves or throws, what every run records, and the one write a run may make.

const SECRET = 'a-secret-of-thirty-two-bytes-or-more!!';
const KEY = { kid: 'k1', secret: SECRET };
const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

let fires = 0;
function fire(token: bigint, payload: unknown = null): Envelope {
  return createEnvelope({ job: 'invoices', scheduledAt: Date.UTC(2026, 11, 1, 10, 0, 0, fires++), token: parseToken(token), issuer: 'node-a', payload });
}

/** A guard of the documented form on a database of its own, its instruments and events read back. */
async function guardOnMemory(options: { keys?: Record<string, string> } = {}) {
  const database = createMemoryFenceDatabase();
  const metrics = inMemoryMetrics();
  stops.push(metrics.shutdown);
  const events: FencedEvent[] = [];
  const guard = createGuard({ store: memoryFences({ database }), resource: 'billing', meterProvider: metrics.provider, logger: (event) => void events.push(event), ...options });
  await guard.migrate();
  const invoices = () => database.rows('invoices').length;
  return { guard, database, metrics, events, invoices };
}

/** Resolves when `signal` aborts (at once if it has). */
const abortOf = (signal: AbortSignal) => new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));

const runs = (metrics: ReturnType<typeof inMemoryMetrics>, outcome: string) => metrics.sum('fenced.handler.fires', { 'fenced.handler.outcome': outcome });

describe('wrapHandler', () => {
  it('gives every dispatch of a fire the same idempotency key, in every version of fenced', () => {
    // A receiving API deduplicates on this key: a change of its derivation across an upgrade would
    // send one fire's email twice. The vector is the derivation's, fixed.
    expect(idempotencyKey('invoices', 'invoices@20261201T100000.000Z')).toBe('JE7TnFUZTduVj8q9I4XzbeTgyEoF7ajDgyCEJNWtYfs');
    expect(idempotencyKey('ledger', 'invoices@20261201T100000.000Z')).not.toBe(idempotencyKey('invoices', 'invoices@20261201T100000.000Z'));
  });

  it('refuses a handler that is not a function when wrapping, not at the first fire', async () => {
    const { guard } = await guardOnMemory();
    expect(() => guard.wrapHandler('handle' as never)).toThrow(new TypeError('wrapHandler: handler must be a function'));
  });

  it('a stale fire before the handler starts: StaleTokenError by default, { status: stale } when asked, the handler never run', async () => {
    const { guard, metrics, invoices } = await guardOnMemory();
    await guard.advance(parseToken(9n));
    let ran = 0;
    const handler = async (_payload: unknown, ctx: { guardedWrite: (fn: (trx: MemoryTransaction) => Promise<void>) => Promise<void> }) => {
      ran++;
      await ctx.guardedWrite(async (trx) => trx.insert('invoices', { id: 1 }));
    };
    const thrown = await guard.wrapHandler<void>(handler)(fire(7n)).catch((err: unknown) => err);
    expect(isFencedError(thrown, 'STALE_TOKEN') && thrown.highest).toBe(9n);
    expect(await guard.wrapHandler<void>(handler, { onStale: 'return' })(fire(7n))).toMatchObject({ status: 'stale', token: 7n, highest: 9n });
    expect(ran).toBe(0);
    expect(invoices()).toBe(0);
    expect(await runs(metrics, 'stale')).toBe(2);
  });

  it('a fire made stale while its handler runs: refused at the write, thrown or returned as asked, nothing written', async () => {
    const { guard, metrics, invoices } = await guardOnMemory();
    const handler = async (_payload: unknown, ctx: { token: bigint; guardedWrite: (fn: (trx: MemoryTransaction) => Promise<void>) => Promise<void> }) => {
      // A newer leader's election commits between the pre-check and this write.
      await guard.advance(parseToken(ctx.token + 1n));
      await ctx.guardedWrite(async (trx) => trx.insert('invoices', { id: 1 }));
    };
    const thrown = await guard.wrapHandler<void>(handler)(fire(7n)).catch((err: unknown) => err);
    expect(isFencedError(thrown, 'STALE_TOKEN') && thrown.highest).toBe(8n);
    expect(await guard.wrapHandler<void>(handler, { onStale: 'return' })(fire(9n))).toMatchObject({ status: 'stale', token: 9n, highest: 10n });
    expect(invoices()).toBe(0);
    expect(await runs(metrics, 'stale')).toBe(2);
  });

  it('reports its own fire applied before as duplicate, but never takes another fire claimed by the handler for its own', async () => {
    const { guard, metrics, invoices } = await guardOnMemory();
    const handle = guard.wrapHandler(async (_payload, ctx) => ctx.guardedWrite(async (trx) => (trx as MemoryTransaction).insert('invoices', { fireId: ctx.fireId })));
    const first = fire(7n);
    expect(await handle(first)).toMatchObject({ status: 'applied', fireId: first.fireId });
    expect(await handle(first)).toEqual({ status: 'duplicate', fireId: first.fireId, token: 7n });
    // A handler that itself writes under another fire's id, already applied: that refusal is the
    // handler's failure, not this fire's duplicate (this fire wrote nothing).
    const other = guard.wrapHandler(async () => guard.guardedWrite(parseToken(7n), async () => undefined, { fireId: first.fireId }));
    const thrown = await other(fire(7n)).catch((err: unknown) => err);
    expect(isFencedError(thrown, 'DUPLICATE_FIRE') && thrown.fireId).toBe(first.fireId);
    expect(invoices()).toBe(1);
    expect(await runs(metrics, 'applied')).toBe(1);
    expect(await runs(metrics, 'duplicate')).toBe(1);
    expect(await runs(metrics, 'failed')).toBe(1);
  });

  it('records every run by how it ended: a refused envelope, a bad signature, a handler that throws', async () => {
    const { guard, metrics, events } = await guardOnMemory({ keys: { k1: SECRET } });
    const handle = guard.wrapHandler(async (payload) => {
      if (payload === 'boom') throw new Error('the handler failed');
      // A token the handler passes itself: its own failure, not a refused envelope.
      if (payload === 'bad token') await guard.guardedWrite(0n, async () => undefined);
      return payload;
    });
    await expect(handle({ v: 1, job: 'invoices', fireId: 'invoices@20261201T100000.000Z' })).rejects.toSatisfy((err: unknown) => isFencedError(err, 'INVALID_ENVELOPE'));
    await expect(handle(fire(7n))).rejects.toSatisfy((err: unknown) => isFencedError(err, 'BAD_SIGNATURE'));
    const forged = { ...signEnvelope(fire(7n), KEY), token: 'not a token' };
    await expect(handle(forged)).rejects.toSatisfy((err: unknown) => isFencedError(err, 'INVALID_ENVELOPE') || isFencedError(err, 'INVALID_TOKEN'));
    await expect(handle(signEnvelope(fire(7n, 'boom'), KEY))).rejects.toThrow('the handler failed');
    await expect(handle(signEnvelope(fire(7n, 'bad token'), KEY))).rejects.toSatisfy((err: unknown) => isFencedError(err, 'INVALID_TOKEN'));
    expect(await handle(signEnvelope(fire(7n, 'ok'), KEY))).toMatchObject({ status: 'applied', result: 'ok' });
    expect(await runs(metrics, 'refused')).toBe(3);
    expect(await runs(metrics, 'failed')).toBe(2);
    expect(await runs(metrics, 'applied')).toBe(1);
    expect(await metrics.count('fenced.handler.duration')).toBe(6);
    // Each refusal is an event naming its code, and the fire when the input named one.
    const refused = events.filter((event) => event.type === 'envelope.refused');
    expect(refused).toHaveLength(3);
    expect(refused[0]).toMatchObject({ resource: 'billing', code: 'INVALID_ENVELOPE', fireId: 'invoices@20261201T100000.000Z' });
    expect(refused[1]).toMatchObject({ resource: 'billing', code: 'BAD_SIGNATURE' });
    expect(refused.every((event) => typeof (event as { code?: unknown }).code === 'string' && (event as { code: string }).code !== 'UNKNOWN')).toBe(true);
    await expect(handle(null)).rejects.toSatisfy((err: unknown) => isFencedError(err, 'INVALID_ENVELOPE'));
    expect(events.filter((event) => event.type === 'envelope.refused').at(-1)).not.toHaveProperty('fireId');
    // An input that throws an error of no fenced kind while it is read is an invalid envelope too.
    const hostile = Object.defineProperty({ ...fire(7n) }, 'job', { enumerable: true, get: () => { throw new Error('a getter that throws'); } });
    await expect(handle(hostile)).rejects.toSatisfy((err: unknown) => isFencedError(err, 'INVALID_ENVELOPE'));
    expect(events.filter((event) => event.type === 'envelope.refused').at(-1)).toMatchObject({ code: 'INVALID_ENVELOPE' });
    expect(await runs(metrics, 'refused')).toBe(5);
  });

  it('lets a run write once: a second ctx.guardedWrite throws, and the first stands', async () => {
    const { guard, invoices } = await guardOnMemory();
    const handle = guard.wrapHandler(async (_payload, ctx) => {
      await ctx.guardedWrite(async (trx) => (trx as MemoryTransaction).insert('invoices', { n: 1 }));
      await ctx.guardedWrite(async (trx) => (trx as MemoryTransaction).insert('invoices', { n: 2 }));
    });
    await expect(handle(fire(7n))).rejects.toThrow("ctx.guardedWrite may be called once per handler run: put all of the fire's writes in one transaction");
    expect(invoices()).toBe(1);
  });

  it("aborts ctx.signal at the handler's timeout, counted from when the call started, or when the caller's signal aborts", async () => {
    const { guard } = await guardOnMemory();
    const seen: Array<{ readonly aborted: boolean; readonly reason: string }> = [];
    const handler = async (payload: unknown, ctx: { signal: AbortSignal }) => {
      if (payload === 'wait') await abortOf(ctx.signal);
      seen.push({ aborted: ctx.signal.aborted, reason: ctx.signal.aborted ? String((ctx.signal.reason as Error).name) : '' });
    };
    // No timeout and no caller's signal: a signal that never aborts.
    await guard.wrapHandler(handler)(fire(7n, 'now'));
    // The timeout alone: it aborts, with a TimeoutError, no sooner than the timeout.
    const started = performance.now();
    await guard.wrapHandler(handler, { timeoutMs: 50 })(fire(7n, 'wait'));
    expect(performance.now() - started).toBeGreaterThanOrEqual(49);
    // The caller's signal alone, and the caller's signal beside a timeout far away: the caller's wins.
    const caller = new AbortController();
    const waiting = guard.wrapHandler(handler)(fire(7n, 'wait'), { signal: caller.signal });
    const both = new AbortController();
    const waitingBoth = guard.wrapHandler(handler, { timeoutMs: 600_000 })(fire(7n, 'wait'), { signal: both.signal });
    caller.abort(new Error('shutting down'));
    both.abort(new Error('shutting down'));
    await waiting;
    await waitingBoth;
    // A timeout used up before the handler first reads its signal: it aborts before anything else
    // the handler waits for, here the same time again (timers run in the order they are due).
    await guard.wrapHandler(async (_payload, ctx) => {
      await sleep(400);
      const first = await Promise.race([abortOf(ctx.signal).then(() => 'aborted'), sleep(300).then(() => 'the time again')]);
      seen.push({ aborted: first === 'aborted', reason: String(first) });
    }, { timeoutMs: 300 })(fire(7n));
    expect(seen).toEqual([
      { aborted: false, reason: '' },
      { aborted: true, reason: 'TimeoutError' },
      { aborted: true, reason: 'Error' },
      { aborted: true, reason: 'Error' },
      { aborted: true, reason: 'aborted' },
    ]);
  });
});
