import { describe, expect, it } from 'vitest';
import { History } from '../history.js';
import { seededRandom } from '../random.js';
import { FaultContext } from './fault-context.js';

/** Timers that keep this process alive (what would hold `pnpm sim` open after its last run). */
const pendingTimers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

describe('FaultContext.waitForLine', () => {
  const context = () => new FaultContext([], undefined, undefined, new History(), seededRandom(1), 1000, Date.now() + 60_000, () => {});

  it('resolves with the node whose line matches, and leaves no timer behind', async () => {
    const ctx = context();
    const before = pendingTimers();
    const waited = ctx.waitForLine((_node, record) => record['kind'] === 'dispatch', 30_000);
    ctx.observe('r2', { at: Date.now(), record: { kind: 'belief' } });
    ctx.observe('r1', { at: Date.now(), record: { kind: 'dispatch' } });
    expect(await waited).toBe('r1');
    expect(pendingTimers()).toBe(before);
  });

  it('resolves undefined when no line matches in time', async () => {
    const ctx = context();
    expect(await ctx.waitForLine(() => false, 10)).toBeUndefined();
  });
});
