import { describe, expect, it } from 'vitest';
import { outcomeOfError, outcomeOfResult } from './dispatch-outcome.js';
import { parseToken } from './token.js';
import { DuplicateFireError, FireGivenUpError, GuardUnavailableError, NotLeaderError, StaleTokenError } from './errors.js';

describe('outcomeOfResult', () => {
  it('reads a wrapped handler outcome by its status, and anything else as applied', () => {
    expect(outcomeOfResult({ status: 'applied', fireId: 'f', token: 1n, result: 3 })).toEqual({ status: 'applied' });
    expect(outcomeOfResult({ status: 'duplicate', fireId: 'f', token: 1n })).toEqual({ status: 'duplicate' });
    // The fence's token travels with it: the coordinator raises its counter above it.
    expect(outcomeOfResult({ status: 'stale', fireId: 'f', token: 1n, highest: 2n })).toEqual({ status: 'stale', highest: 2n });
    // Parsed at the edge: a highest that is no token is left out, never trusted.
    expect(outcomeOfResult({ status: 'stale', highest: -5n })).toEqual({ status: 'stale' });
    expect(outcomeOfResult({ status: 'stale', highest: 2 ** 70 })).toEqual({ status: 'stale' });
    expect(outcomeOfResult({ status: 'failed-permanent', reason: 'gone' })).toMatchObject({ status: 'failed-permanent', reason: 'gone' });
    expect(outcomeOfResult({ status: 'failed-permanent' })).toMatchObject({ status: 'failed-permanent', reason: 'given up by the handler' });
    expect(outcomeOfResult({ status: 'failed-retryable', error: 'x' })).toEqual({ status: 'failed-retryable', error: 'x' });
    for (const value of [undefined, null, 0, 'done', { status: 'paid' }, { rows: [] }]) expect(outcomeOfResult(value)).toEqual({ status: 'applied' });
  });

  it('reads a fenced service answer (sendFire) by its Fenced-Outcome; any answer that is not a settled fire is retried', () => {
    const answer = (status: number, outcome: string | undefined) => ({ status, outcome, headers: {}, body: undefined });
    expect(outcomeOfResult(answer(201, 'applied'))).toEqual({ status: 'applied' });
    expect(outcomeOfResult(answer(201, 'replayed'))).toEqual({ status: 'applied' });
    expect(outcomeOfResult(answer(409, 'duplicate'))).toEqual({ status: 'duplicate' });
    expect(outcomeOfResult(answer(409, 'stale'))).toEqual({ status: 'stale' });
    expect(outcomeOfResult(answer(200, undefined))).toEqual({ status: 'applied' }); // a service that does not fence
    for (const [status, outcome] of [[503, 'unavailable'], [401, 'refused'], [400, 'refused'], [500, undefined], [404, undefined]] as const) {
      expect(outcomeOfResult(answer(status, outcome))).toMatchObject({ status: 'failed-retryable' });
    }
  });
});

describe('outcomeOfError', () => {
  it('reads a stale token or a lost lease as stale, a claimed fire as a duplicate, a give-up as permanent, anything else as retryable', () => {
    expect(outcomeOfError(new StaleTokenError('r', parseToken(1n), parseToken(2n)))).toEqual({ status: 'stale', highest: 2n });
    expect(outcomeOfError(new NotLeaderError('cron', 'held by another term'))).toEqual({ status: 'stale' });
    expect(outcomeOfError(new DuplicateFireError('r', 'f'))).toEqual({ status: 'duplicate' });
    const giveUp = new FireGivenUpError('customer deleted');
    expect(outcomeOfError(giveUp)).toEqual({ status: 'failed-permanent', reason: 'customer deleted', error: giveUp });
    const down = new GuardUnavailableError('the guard could not reach its database', { cause: new Error('ECONNRESET') });
    expect(outcomeOfError(down)).toEqual({ status: 'failed-retryable', error: down });
    expect(outcomeOfError('a string')).toEqual({ status: 'failed-retryable', error: 'a string' });
  });
});
