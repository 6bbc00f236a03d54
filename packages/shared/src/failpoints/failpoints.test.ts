import { afterEach, describe, expect, it } from 'vitest';
import { failpoints, type FailpointHit } from './failpoints.js';

afterEach(() => failpoints.disarm());

describe('failpoints', () => {
  it('are off until armed, and a hit of an unarmed name does nothing', async () => {
    expect(failpoints.armed).toBe(false);
    const hits: FailpointHit[] = [];
    const stop = failpoints.onHit((h) => hits.push(h));
    await failpoints.hit('guard.checked-before-commit');
    stop();
    expect(hits).toEqual([]);
  });

  it('run the armed action the given number of times, report each hit first, then disarm themselves', async () => {
    const order: string[] = [];
    const stop = failpoints.onHit((h) => order.push(`hit ${h.name} ${h.action}`));
    failpoints.arm('lease.renew-sent-before-reply', { kind: 'call', run: () => void order.push('action') }, 2);
    expect(failpoints.armed).toBe(true);
    await failpoints.hit('lease.renew-sent-before-reply');
    await failpoints.hit('lease.acquired-before-dispatch'); // another name: not armed
    await failpoints.hit('lease.renew-sent-before-reply');
    await failpoints.hit('lease.renew-sent-before-reply');
    stop();
    expect(order).toEqual(['hit lease.renew-sent-before-reply call', 'action', 'hit lease.renew-sent-before-reply call', 'action']);
    expect(failpoints.armed).toBe(false);
  });

  it('hold the caller for a delay, and for as long as a callback runs', async () => {
    failpoints.arm('scheduler.mid-catch-up', { kind: 'delay', ms: 30 });
    const before = performance.now();
    await failpoints.hit('scheduler.mid-catch-up');
    expect(performance.now() - before).toBeGreaterThanOrEqual(25);
    let release!: () => void;
    failpoints.arm('handler.prechecked-before-write', { kind: 'call', run: () => new Promise<void>((r) => (release = r)) });
    let passed = false;
    const held = failpoints.hit('handler.prechecked-before-write').then(() => (passed = true));
    await new Promise((r) => setImmediate(r));
    expect(passed).toBe(false);
    release();
    await held;
    expect(passed).toBe(true);
  });

  it('stall the whole thread, timers included, rather than yield', async () => {
    failpoints.arm('scheduler.mid-catch-up', { kind: 'stall', ms: 60 });
    let timerRanAt: number | undefined;
    const before = performance.now();
    setTimeout(() => (timerRanAt = performance.now()), 0);
    await failpoints.hit('scheduler.mid-catch-up');
    // Back from the stall, before anything else could run: the timer due at once has not fired.
    expect(timerRanAt).toBeUndefined();
    expect(performance.now() - before).toBeGreaterThanOrEqual(60);
    await new Promise((r) => setTimeout(r, 0));
    expect(timerRanAt! - before).toBeGreaterThanOrEqual(60);
  });

  it('refuse an unknown name, a bad count and a bad delay with a TypeError, and arm nothing', () => {
    expect(() => failpoints.arm('lease.nowhere' as never, { kind: 'kill' })).toThrow(/unknown failpoint "lease.nowhere": choose from lease.acquire-sent-before-reply, lease.acquired-before-dispatch/);
    expect(() => failpoints.arm('guard.committed-before-mark', { kind: 'kill' }, 0)).toThrow(TypeError);
    expect(() => failpoints.arm('guard.committed-before-mark', { kind: 'delay', ms: -1 })).toThrow(TypeError);
    expect(() => failpoints.arm('guard.committed-before-mark', { kind: 'stall', ms: Number.NaN })).toThrow(/a failpoint stall is a number of ms >= 0/);
    expect(failpoints.armed).toBe(false);
  });
});
