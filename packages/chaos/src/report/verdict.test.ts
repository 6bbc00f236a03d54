import { describe, expect, it } from 'vitest';
import type { CheckResult } from '../checker/check-run.js';
import { verdictOf } from './verdict.js';

const check = (counts: Partial<CheckResult>): CheckResult => ({
  fires: 10,
  effects: 12,
  duplicates: 0,
  missed: 0,
  staleApplied: 0,
  early: 0,
  lease: 0,
  scheduler: 0,
  handler: 0,
  guard: 0,
  dedupe: 0,
  liveness: 0,
  staleRefused: 0,
  duplicatesRefused: 0,
  tokensRepaired: 0,
  writesRetried: 0,
  failpointHits: 0,
  takeovers: 0,
  overlaps: [],
  maxFailoverGapMs: 900,
  anomalies: 0,
  violations: [],
  marks: [],
  ...counts,
});

describe('verdictOf', () => {
  it('passes a clean guarded run that shows every protection its scenario exercises at work', () => {
    expect(verdictOf({ mode: 'guarded', check: check({ staleRefused: 2, tokensRepaired: 1 }), exercises: ['stale refused', 'token repaired'] })).toEqual({ ok: true, text: 'no anomaly' });
  });

  it('fails a clean guarded run as toothless when a protection it must exercise never came into play', () => {
    expect(verdictOf({ mode: 'guarded', check: check({ staleRefused: 2 }), exercises: ['stale refused', 'duplicate dropped', 'token repaired'] })).toEqual({
      ok: false,
      text: 'toothless: no duplicate dropped, no token repaired',
    });
  });

  it('fails a guarded run with anomalies, whatever it exercised', () => {
    expect(verdictOf({ mode: 'guarded', check: check({ anomalies: 3, staleRefused: 1 }), exercises: ['stale refused'] })).toEqual({ ok: false, text: '3 anomalies' });
  });

  it('passes a control only when it shows damage', () => {
    expect(verdictOf({ mode: 'control', check: check({ anomalies: 2 }) }).ok).toBe(true);
    expect(verdictOf({ mode: 'control', check: check({}) })).toEqual({ ok: false, text: 'no damage: the scenario did not bite' });
  });
});
