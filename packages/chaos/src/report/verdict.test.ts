import { describe, expect, it } from 'vitest';
import type { CheckResult } from '../checker/check-run.js';
import { ANOMALY_COLUMNS } from '../checker/invariants.js';
import { PROTECTIONS } from '../checker/protections.js';
import { verdictOf } from './verdict.js';

const check = (counts: { anomalies?: number; protections?: Partial<CheckResult['protections']>; inconclusive?: CheckResult['inconclusive'] } = {}): CheckResult => ({
  fires: 10,
  effects: 12,
  columns: Object.fromEntries(ANOMALY_COLUMNS.map(({ column }) => [column, 0])) as unknown as CheckResult['columns'],
  protections: { ...(Object.fromEntries(Object.keys(PROTECTIONS).map((p) => [p, 0])) as unknown as CheckResult['protections']), ...counts.protections },
  overlaps: [],
  maxFailoverGapMs: 900,
  anomalies: counts.anomalies ?? 0,
  violations: [],
  marks: [],
  inconclusive: counts.inconclusive ?? null,
  starvedMs: counts.inconclusive === undefined ? 0 : 1200,
});

describe('verdictOf', () => {
  it('passes a clean guarded run that shows every protection its scenario exercises at work', () => {
    expect(verdictOf({ mode: 'guarded', check: check({ protections: { 'stale refused': 2, 'token repaired': 1 } }), exercises: ['stale refused', 'token repaired'] })).toEqual({ ok: true, inconclusive: false, text: 'no anomaly' });
  });

  it('takes any one of a list of protections as the list exercised, and names the list when none came into play', () => {
    const anyOf = [['duplicate dropped', 'stale refused']] as const;
    expect(verdictOf({ mode: 'guarded', check: check({ protections: { 'stale refused': 1 } }), exercises: anyOf })).toEqual({ ok: true, inconclusive: false, text: 'no anomaly' });
    expect(verdictOf({ mode: 'guarded', check: check({ protections: { 'duplicate dropped': 1 } }), exercises: anyOf })).toEqual({ ok: true, inconclusive: false, text: 'no anomaly' });
    expect(verdictOf({ mode: 'guarded', check: check({ protections: { 'token repaired': 1 } }), exercises: anyOf })).toEqual({ ok: false, inconclusive: false, text: 'toothless: no duplicate dropped or stale refused' });
  });

  it('fails a clean guarded run as toothless when a protection it must exercise never came into play', () => {
    expect(verdictOf({ mode: 'guarded', check: check({ protections: { 'stale refused': 2 } }), exercises: ['stale refused', 'duplicate dropped', 'token repaired'] })).toEqual({
      ok: false,
      inconclusive: false,
      text: 'toothless: no duplicate dropped, no token repaired',
    });
  });

  it("judges a toothless run inconclusive only when its faults said they missed their precondition, and says why; an anomaly still fails it", () => {
    const missed = [
      { at: 1, kind: 'fault', fault: 'precondition missed', phase: 'start', detail: 'no leader within 8000 ms for primary-only election 1 of 2' },
      { at: 1, kind: 'fault', fault: 'precondition missed', phase: 'end' },
    ] as const;
    expect(verdictOf({ mode: 'guarded', check: check({ protections: { 'duplicate dropped': 1 } }), exercises: ['duplicate dropped', 'token repaired'], events: missed })).toEqual({
      ok: false,
      inconclusive: true,
      text: 'inconclusive: no token repaired, the faults missed their precondition (no leader within 8000 ms for primary-only election 1 of 2)',
    });
    // Another fault's events change nothing: toothless.
    const other = [{ at: 1, kind: 'fault', fault: 'crash', phase: 'start', target: 'r1' }] as const;
    expect(verdictOf({ mode: 'guarded', check: check({ protections: { 'duplicate dropped': 1 } }), exercises: ['duplicate dropped', 'token repaired'], events: other }).text).toBe('toothless: no token repaired');
    expect(verdictOf({ mode: 'guarded', check: check({ anomalies: 1 }), exercises: ['token repaired'], events: missed })).toEqual({ ok: false, inconclusive: false, text: '1 anomalies' });
  });

  it('fails a guarded run with anomalies, whatever it exercised', () => {
    expect(verdictOf({ mode: 'guarded', check: check({ anomalies: 3, protections: { 'stale refused': 1 } }), exercises: ['stale refused'] })).toEqual({ ok: false, inconclusive: false, text: '3 anomalies' });
  });

  it('passes a control only when it shows damage', () => {
    expect(verdictOf({ mode: 'control', check: check({ anomalies: 2 }) }).ok).toBe(true);
    expect(verdictOf({ mode: 'control', check: check({}) })).toEqual({ ok: false, inconclusive: false, text: 'no damage: the scenario did not bite' });
  });

  it('judges a control without damage inconclusive when its faults said they missed their precondition; damage still passes it', () => {
    const missed = [
      { at: 1, kind: 'fault', fault: 'precondition missed', phase: 'start', detail: 'redis lag on r1: no other replica was elected during the 2977 ms lag' },
      { at: 1, kind: 'fault', fault: 'precondition missed', phase: 'end' },
    ] as const;
    expect(verdictOf({ mode: 'control', check: check({}), events: missed })).toEqual({
      ok: false,
      inconclusive: true,
      text: 'inconclusive: no damage, the faults missed their precondition (redis lag on r1: no other replica was elected during the 2977 ms lag)',
    });
    expect(verdictOf({ mode: 'control', check: check({ anomalies: 1 }), events: missed })).toEqual({ ok: true, inconclusive: false, text: 'damage shown: 1' });
    const other = [{ at: 1, kind: 'fault', fault: 'redis lag', phase: 'start', target: 'r1' }] as const;
    expect(verdictOf({ mode: 'control', check: check({}), events: other }).text).toBe('no damage: the scenario did not bite');
  });

  it('fails any run whose harness failed mid-run, naming the error, whatever else it shows; a guarded run names its anomalies first', () => {
    const failed = [
      { at: 1, kind: 'fault', fault: 'harness failed', phase: 'start', detail: 'the Redis server on 16155 did not sync with its primary within 53775 ms' },
      { at: 1, kind: 'fault', fault: 'harness failed', phase: 'end' },
    ] as const;
    const text = 'harness failed: the Redis server on 16155 did not sync with its primary within 53775 ms';
    // Clean, every protection exercised, judged: still failed.
    expect(verdictOf({ mode: 'guarded', check: check({ protections: { 'stale refused': 1 } }), exercises: ['stale refused'], events: failed })).toEqual({ ok: false, inconclusive: false, text });
    // Neither inconclusive (starved) nor toothless hides it.
    const starved = { reason: 'replica r2 starved of CPU for 4.1 s', count: 1, violations: [] };
    expect(verdictOf({ mode: 'guarded', check: check({ inconclusive: starved }), exercises: ['stale refused'], events: failed })).toEqual({ ok: false, inconclusive: false, text });
    expect(verdictOf({ mode: 'guarded', check: check({ anomalies: 2 }), events: failed }).text).toBe('2 anomalies');
    // A control's damage does not pass a run that did not run its scenario to the end.
    expect(verdictOf({ mode: 'control', check: check({ anomalies: 3 }), events: failed })).toEqual({ ok: false, inconclusive: false, text });
    expect(verdictOf({ mode: 'control', check: check({}), events: failed })).toEqual({ ok: false, inconclusive: false, text });
  });

  it('calls a run with no anomaly but timing it could not judge inconclusive, never passed; anomalies still fail it', () => {
    const starved = { reason: 'replica r2 starved of CPU for 4.1 s', count: 2, violations: ['dispatched 300 ms past its bound: …'] };
    expect(verdictOf({ mode: 'guarded', check: check({ inconclusive: starved, protections: { 'stale refused': 1 } }), exercises: ['stale refused'] })).toEqual({
      ok: false,
      inconclusive: true,
      text: 'inconclusive: replica r2 starved of CPU for 4.1 s; 2 timing breaks not judged',
    });
    expect(verdictOf({ mode: 'guarded', check: check({ anomalies: 1, inconclusive: starved }) })).toMatchObject({ ok: false, inconclusive: false, text: '1 anomalies' });
    expect(verdictOf({ mode: 'control', check: check({ inconclusive: starved }) })).toMatchObject({ ok: false, inconclusive: true });
    expect(verdictOf({ mode: 'control', check: check({ anomalies: 2, inconclusive: starved }) })).toMatchObject({ ok: true, text: 'damage shown: 2' });
  });
});
