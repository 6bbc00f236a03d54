import { describe, expect, it } from 'vitest';
import { planCatchUp } from './catch-up.js';
import { DueQueue } from './due-queue.js';
import { fireId } from '@fenced/shared';
import { cronSchedule, intervalSchedule } from './job-schedule.js';

const every100 = intervalSchedule(100);

describe('planCatchUp', () => {
  it('owes nothing before the first dispatch of a job', () => {
    expect(planCatchUp(every100, null, 1050, 'all', 10_000, 100)).toEqual({ fires: [], skipped: 0, beforeWindow: false, next: 1100 });
  });

  it('all: every missed fire, oldest first', () => {
    expect(planCatchUp(every100, 700, 1050, 'all', 10_000, 100)).toEqual({ fires: [800, 900, 1000], skipped: 0, beforeWindow: false, next: 1100 });
  });

  it('counts a fire due exactly now among the missed: under once, one fire stands for them all (found by pnpm mutants)', () => {
    // Left out, the catch-up would send 900 for the lot and the regular schedule 1000 right after: two.
    expect(planCatchUp(every100, 700, 1000, 'once', 10_000, 100)).toEqual({ fires: [1000], skipped: 2, beforeWindow: false, next: 1100 });
  });

  it('once: the latest missed fire stands for the lot', () => {
    expect(planCatchUp(every100, 700, 1050, 'once', 10_000, 100)).toEqual({ fires: [1000], skipped: 2, beforeWindow: false, next: 1100 });
  });

  it('once: nothing missed, nothing owed (found by StrykerJS)', () => {
    expect(planCatchUp(every100, 1000, 1050, 'once', 10_000, 100)).toEqual({ fires: [], skipped: 0, beforeWindow: false, next: 1100 });
  });

  it('says fires were missed before the window only when the first missed one is older than its start (found by StrykerJS)', () => {
    // The window starts at 800: the first missed fire, 800, is inside it.
    expect(planCatchUp(every100, 700, 1050, 'all', 250, 100)).toEqual({ fires: [800, 900, 1000], skipped: 0, beforeWindow: false, next: 1100 });
    expect(planCatchUp(every100, 600, 1050, 'all', 250, 100)).toEqual({ fires: [800, 900, 1000], skipped: 0, beforeWindow: true, next: 1100 });
  });

  it('ends with a schedule that ends: no fire after its last, none before the window claimed (found by StrykerJS)', () => {
    // Fires every 100 ms up to 900, then none.
    const ending = { nextAfter: (t: number) => (t < 900 ? (Math.floor(t / 100) + 1) * 100 : null) };
    expect(planCatchUp(ending, 700, 1050, 'all', 10_000, 100)).toEqual({ fires: [800, 900], skipped: 0, beforeWindow: false, next: null });
    expect(planCatchUp(ending, 950, 1050, 'all', 100, 100)).toEqual({ fires: [], skipped: 0, beforeWindow: false, next: null });
  });

  it('skip: none', () => {
    expect(planCatchUp(every100, 700, 1050, 'skip', 10_000, 100)).toEqual({ fires: [], skipped: 3, beforeWindow: false, next: 1100 });
  });

  it('keeps the newest fires inside the window and limit', () => {
    expect(planCatchUp(every100, 0, 1050, 'all', 10_000, 2)).toEqual({ fires: [900, 1000], skipped: 8, beforeWindow: false, next: 1100 });
    expect(planCatchUp(every100, 0, 1050, 'all', 250, 100)).toEqual({ fires: [800, 900, 1000], skipped: 0, beforeWindow: true, next: 1100 });
  });

  it('stays cheap when a fast job was left alone for a month', () => {
    const month = 30 * 86_400_000;
    const started = performance.now();
    const plan = planCatchUp(intervalSchedule(10), 0, month, 'all', 60_000, 100);
    expect(plan.fires).toHaveLength(100);
    expect(plan.beforeWindow).toBe(true);
    expect(performance.now() - started).toBeLessThan(2000);
  });
});

describe('schedules', () => {
  it('aligns intervals on the epoch, so every replica computes the same fire times', () => {
    expect(intervalSchedule(500).nextAfter(1234)).toBe(1500);
    expect(intervalSchedule(500).nextAfter(1500)).toBe(2000);
  });

  it('evaluates cron in its time zone, with seconds', () => {
    // 09:00 in Paris on 29 Nov 2026 is 08:00 UTC (CET, UTC+1).
    const paris = cronSchedule('0 9 * * *', 'Europe/Paris');
    expect(new Date(paris.nextAfter(Date.UTC(2026, 10, 29, 0))!).toISOString()).toBe('2026-11-29T08:00:00.000Z');
    const everyTwoSeconds = cronSchedule('*/2 * * * * *');
    expect(everyTwoSeconds.nextAfter(Date.UTC(2026, 10, 29, 10, 0, 0, 500))).toBe(Date.UTC(2026, 10, 29, 10, 0, 2));
  });

  it('names fires deterministically, without colons', () => {
    expect(fireId('invoices', Date.UTC(2026, 10, 29, 10))).toBe('invoices@20261129T100000.000Z');
  });
});

describe('DueQueue', () => {
  it('pops entries in due order, only when due', () => {
    const q = new DueQueue();
    for (const [job, at] of [['c', 30], ['a', 10], ['d', 40], ['b', 20]] as const) q.push(job, at);
    expect(q.popDue(5)).toBeUndefined();
    const order: string[] = [];
    for (let e = q.popDue(35); e !== undefined; e = q.popDue(35)) order.push(e.job);
    expect(order).toEqual(['a', 'b', 'c']);
    expect(q.size).toBe(1);
  });
});
