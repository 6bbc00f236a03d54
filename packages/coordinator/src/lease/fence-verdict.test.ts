import { FenceAheadError, GuardUnavailableError, type Fence, parseToken } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { judgeFenceAnswers } from './fence-verdict.js';

const fence = (resource: string): Fence => ({ resource, highest: async () => null, advance: async () => undefined });
const fences = [fence('invoices'), fence('ledger'), fence('emails')];
const ok: PromiseSettledResult<unknown> = { status: 'fulfilled', value: undefined };
const ahead = (resource: string, highest: bigint): PromiseSettledResult<unknown> => ({ status: 'rejected', reason: new FenceAheadError(resource, parseToken(5n), parseToken(highest)) });
const down: PromiseSettledResult<unknown> = { status: 'rejected', reason: new GuardUnavailableError('down', { cause: new Error('ECONNREFUSED') }) };

describe('judgeFenceAnswers', () => {
  it('leads when every fence took the token', () => {
    expect(judgeFenceAnswers(fences, [ok, ok, ok]).verdict).toEqual({ kind: 'ok' });
    expect(judgeFenceAnswers([], []).verdict).toEqual({ kind: 'ok' });
  });

  it('calls a fence at or above the token a regression, past the highest of them', () => {
    const answers = judgeFenceAnswers(fences, [ahead('invoices', 7n), ok, ahead('emails', 12n)]);
    expect(answers.verdict).toEqual({ kind: 'regressed', highest: 12n });
    expect(answers.ahead).toEqual([{ resource: 'invoices', highest: 7n }, { resource: 'emails', highest: 12n }]);
  });

  it('fails closed on a fence it cannot reach, naming it', () => {
    const answers = judgeFenceAnswers(fences, [ok, down, ok]);
    expect(answers.verdict).toEqual({ kind: 'unavailable' });
    expect(answers.unreachable.map((u) => u.resource)).toEqual(['ledger']);
  });

  it('repairs a regression even when another fence is down (the repair needs only the answers)', () => {
    expect(judgeFenceAnswers(fences, [down, ahead('ledger', 9n), ok]).verdict).toEqual({ kind: 'regressed', highest: 9n });
  });

  it('never treats an error that merely looks like FENCE_AHEAD by message as one', () => {
    const lookalike: PromiseSettledResult<unknown> = { status: 'rejected', reason: new Error('fence for resource "x" is already at 9') };
    expect(judgeFenceAnswers(fences, [lookalike, ok, ok]).verdict).toEqual({ kind: 'unavailable' });
  });
});
