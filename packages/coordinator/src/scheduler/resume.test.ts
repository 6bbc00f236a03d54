import type { Fence } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { recoverLastFires, resumePoint } from './resume.js';

const now = 10_000_000;
const window = 3_600_000;
const facts = { recorded: null, recordLost: false, recovered: undefined, regressed: false, now, catchUpWindowMs: window };

describe('resumePoint', () => {
  it('resumes a recorded job from its record and records nothing new', () => {
    expect(resumePoint({ ...facts, recorded: 9_000_000, recordLost: true, recovered: 1, regressed: true })).toEqual({ last: 9_000_000, baseline: null });
  });

  it('starts a job that never ran from now: nothing before now is owed', () => {
    expect(resumePoint(facts)).toEqual({ last: null, baseline: now });
  });

  it('resumes a job whose record Redis lost from the durable record', () => {
    expect(resumePoint({ ...facts, recordLost: true, recovered: 9_500_000, regressed: true })).toEqual({ last: 9_500_000, baseline: 9_500_000 });
  });

  it('catches up the whole window when Redis lost data and nothing durable is known', () => {
    expect(resumePoint({ ...facts, recordLost: true, regressed: true })).toEqual({ last: now - window, baseline: now - window });
  });

  it('resumes a queued job from its last applied fire when the record is ahead of it (its waiting copies are now stale)', () => {
    expect(resumePoint({ ...facts, recorded: 9_000_000, queuedApplied: 8_000_000 })).toEqual({ last: 8_000_000, baseline: null });
    expect(resumePoint({ ...facts, recorded: 9_000_000, queuedApplied: 9_500_000 })).toEqual({ last: 9_000_000, baseline: null });
    expect(resumePoint({ ...facts, recorded: 9_000_000, queuedApplied: undefined })).toEqual({ last: 9_000_000, baseline: null });
  });

  it('asks the durable record only when the record was lost, not for a job merely added', () => {
    expect(resumePoint({ ...facts, recordLost: false, recovered: 9_500_000 })).toEqual({ last: null, baseline: now });
  });
});

describe('recoverLastFires', () => {
  const fence = (answer: Record<string, number> | Error): Fence => ({
    resource: 'r',
    highest: async () => null,
    advance: async () => undefined,
    lastAppliedFires: async () => {
      if (answer instanceof Error) throw answer;
      return new Map(Object.entries(answer));
    },
  });

  it('takes, per job, the latest fire over every fence that keeps applied fires; a failing one tells nothing', async () => {
    const errors: unknown[] = [];
    const latest = await recoverLastFires({
      jobs: ['a', 'b', 'c'],
      now,
      catchUpWindowMs: window,
      hook: undefined,
      fences: [fence({ a: 100, b: 300 }), fence({ a: 200, c: now + 1 }), fence(new Error('down')), { resource: 'plain', highest: async () => null, advance: async () => undefined }],
      onError: (e) => errors.push(e),
    });
    expect(Object.fromEntries(latest)).toEqual({ a: 200, b: 300 }); // c's answer is from the future
    expect(errors).toHaveLength(1);
  });

  it('asks the user hook instead, when given, once for all jobs', async () => {
    const asked: string[][] = [];
    const latest = await recoverLastFires({
      jobs: ['a', 'b'],
      now,
      catchUpWindowMs: window,
      hook: async (jobs) => (asked.push([...jobs]), new Map([['a', 5]])),
      fences: [fence({ a: 100 })],
      onError: () => undefined,
    });
    expect(asked).toEqual([['a', 'b']]);
    expect(Object.fromEntries(latest)).toEqual({ a: 5 });
  });
});
