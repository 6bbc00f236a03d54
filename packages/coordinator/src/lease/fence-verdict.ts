import { isFencedError, type Fence, type Token } from '@fenced/shared';

/** What an election does after advancing every fence to its new token. */
export type FenceVerdict =
  /** Every fence took the token: it is above everything ever committed. Lead. */
  | { readonly kind: 'ok' }
  /**
   * A fence already held the token or more: Redis lost data (a restart without persistence, a lossy
   * failover) and minted a token that was used before. Raise the counter past `highest`, elect again.
   */
  | { readonly kind: 'regressed'; readonly highest: Token }
  /** A fence could not be reached: the token cannot be proven fresh. Do not lead (fail closed). */
  | { readonly kind: 'unavailable' };

export interface FenceAnswers {
  readonly verdict: FenceVerdict;
  /** Each fence found ahead of the token, with what it holds. */
  readonly ahead: ReadonlyArray<{ readonly resource: string; readonly highest: Token }>;
  /** Each fence that could not answer, with why. */
  readonly unreachable: ReadonlyArray<{ readonly resource: string; readonly error: unknown }>;
}

/**
 * Decides an election from the fences' answers to `advance(token)`, in the fences' order. A pure
 * function: the coordinator reports and acts on what it returns. A regression outranks an unreachable
 * fence (the counter must be repaired either way, and repairing needs only the fences that answered).
 */
export function judgeFenceAnswers(fences: readonly Fence[], answers: readonly PromiseSettledResult<unknown>[]): FenceAnswers {
  const ahead: Array<{ resource: string; highest: Token }> = [];
  const unreachable: Array<{ resource: string; error: unknown }> = [];
  answers.forEach((answer, i) => {
    if (answer.status === 'fulfilled') return;
    const resource = fences[i]!.resource;
    if (isFencedError(answer.reason, 'FENCE_AHEAD')) ahead.push({ resource, highest: answer.reason.highest });
    else unreachable.push({ resource, error: answer.reason });
  });
  if (ahead.length > 0) {
    const highest = ahead.reduce((max, a) => (a.highest > max ? a.highest : max), ahead[0]!.highest);
    return { verdict: { kind: 'regressed', highest }, ahead, unreachable };
  }
  return { verdict: unreachable.length > 0 ? { kind: 'unavailable' } : { kind: 'ok' }, ahead, unreachable };
}
