import type { Token } from '@fenced/shared';

/**
 * The election-time advance when a deposed leader's transaction blocks it, for any fence store.
 *
 * A lease that expires releases nothing in the store: a leader frozen inside its guarded transaction
 * (SIGSTOP, a hung VM, a stopped container) keeps its lock on the fence row, and the next leader's
 * advance waits for it for as long as it is frozen. By the fence's own promise that transaction can
 * never commit under the new term (the raise waits for it, then refuses every lower token), so
 * waiting for it buys nothing once it has had a fair chance to finish. The advance therefore waits
 * `graceMs` (a live transaction of the old term finishes in that time, or it was never going to
 * matter), then asks the store to end the transactions that block it and carry a lower token, and
 * repeats that every `graceMs` until the advance commits or the store's own bound on the wait
 * (`timeoutMs`) fails it. A store never ends a transaction of the same or a higher token (a live
 * leader of a newer term), nor one that does not say which token it carries.
 */
export interface TakeoverPolicy {
  /** How long the advance waits on blocking writes of lower tokens before it ends them. */
  readonly graceMs: number;
  /** How long the advance may wait on locks in all; then it fails and the election fails closed. */
  readonly timeoutMs: number;
}

/** One transaction the store found blocking the advance with a lower token. */
export interface BlockingWrite {
  /** The store's name for the session (a PostgreSQL backend pid, a MySQL thread id). */
  readonly session: string;
  /** The token its guarded write announced. */
  readonly token: Token;
  /** Whether the store ended it (false: the store's role may not, and the advance goes on waiting). */
  readonly ended: boolean;
}

/** What a fence store provides for an advance that can take over. */
export interface TakeoverStore<Waiter> {
  /**
   * Starts the strict advance of `resource` to `token`, waiting on locks for `timeoutMs` at most.
   * `waiter` resolves with the session that waits, as soon as it is known; `done` when the advance
   * committed (or rejects with why it did not).
   */
  startAdvance(resource: string, token: Token, timeoutMs: number): { readonly waiter: Promise<Waiter>; readonly done: Promise<void> };
  /** Ends the store's guarded transactions of a token below `token` that block `waiter`. */
  endBlockers(waiter: Waiter, token: Token): Promise<readonly BlockingWrite[]>;
}

/** Runs the advance, ending blockers of lower tokens after each grace period; reports each one found. */
export async function advanceWithTakeover<Waiter>(
  store: TakeoverStore<Waiter>,
  resource: string,
  token: Token,
  policy: TakeoverPolicy | false,
  onBlocker: (blocker: BlockingWrite) => void,
): Promise<void> {
  const { waiter, done } = store.startAdvance(resource, token, policy === false ? 0 : policy.timeoutMs);
  // Whatever happens below, a failure of either is read through `done` or not at all.
  waiter.catch(() => {});
  if (policy === false) return done;
  let settled = false;
  const reported = new Set<string>();
  // Settling ends the grace period in progress: a pending timer would hold a process that is done
  // open for up to `graceMs` (a minute at most), once for every advance it ran.
  const gracePeriods = new AbortController();
  const settle = () => {
    settled = true;
    gracePeriods.abort();
  };
  const finished = done.then(settle, settle);
  for (;;) {
    await Promise.race([finished, gracePeriod(policy.graceMs, gracePeriods.signal)]);
    // Once settled (in the grace period or since), this race ends at once and the check returns.
    const session = await Promise.race([waiter, finished.then(() => undefined)]).catch(() => undefined);
    if (settled) return done;
    if (session === undefined) continue;
    let blockers: readonly BlockingWrite[];
    try {
      blockers = await store.endBlockers(session, token);
    } catch {
      // Finding blockers is best effort: the advance is still bounded by its own timeout (and once
      // it has settled, the next turn returns before any search).
      continue;
    }
    // A blocker this role may not end is found again every grace period: report it once.
    for (const blocker of blockers) {
      const key = `${blocker.session}:${blocker.ended}`;
      if (reported.has(key)) continue;
      reported.add(key);
      onBlocker(blocker);
    }
  }
}

/**
 * Resolves after `ms`, or at once (its timer cleared) when `signal` aborts. The global `setTimeout`,
 * not `node:timers/promises`: fake timers (vitest's, @sinonjs/fake-timers, the deterministic
 * simulation's) replace the global, and cannot reach the ESM binding of the other, whose real timer
 * would leave an advance under virtual time never ending a blocker.
 */
function gracePeriod(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const ended = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', ended);
      resolve();
    }, ms);
    signal.addEventListener('abort', ended, { once: true });
  });
}
