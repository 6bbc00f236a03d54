// What the SQL fence stores share about a guarded transaction that failed: the phase it failed in,
// and what it left behind. Each store's session throws it; the write loop (write-attempts.ts) reads it.

/** Where in a guarded transaction an error came from. */
export type TransactionPhase = 'open' | 'body' | 'commit';

/** What a failed guarded transaction left behind, beside the error itself. */
export interface PhaseErrorState {
  /**
   * The connection failed (it reported an error, or the ROLLBACK failed too): it must not go back to
   * its pool, and an error `fn` threw in the body phase came from the lost connection, not from `fn`.
   */
  readonly connectionBroken?: boolean;
  /** The COMMIT was sent and no answer came back: whether it took effect is not known. */
  readonly outcomeUnknown?: boolean;
}

/** An error thrown inside a guarded transaction, tagged with the phase it came from. */
export class PhaseError extends Error {
  override readonly name = 'PhaseError';
  readonly connectionBroken: boolean;
  readonly outcomeUnknown: boolean;
  constructor(
    readonly phase: TransactionPhase,
    override readonly cause: unknown,
    state: PhaseErrorState = {},
  ) {
    super(`guarded transaction failed in phase ${phase}`, { cause });
    this.connectionBroken = state.connectionBroken ?? false;
    this.outcomeUnknown = state.outcomeUnknown ?? false;
  }
}
