import type { Token } from '@fenced/shared';
import type { AppliedOutcome } from './fence-records.js';
import type { BatchFire, BatchVerdict } from './fence-store.js';
import type { GuardedWriteContext } from './write-context.js';

/**
 * What a layer above the guard (the handler wrapper) calls: the guard's pre-check and its write, on
 * a token already parsed. Defined with the guard, so the layer above imports the guard's seam and the
 * guard imports nothing of the layer above.
 */
export interface GuardPort<Trx> {
  /** The resource the port fences. */
  readonly resource: string;
  /**
   * Refuses a stale token before any work starts (advisory; the write is the authority): throws
   * StaleTokenError. `fireId` only labels a refusal in the record operators read; it plays no part
   * in the check.
   */
  precheck(token: Token, fireId: string): Promise<void>;
  /**
   * The authoritative write, claiming `fireId` in the same transaction. `fn` is the caller's and is
   * checked to be a function here. `issuer`: the node the token was issued to (a lease check then
   * compares the holder too). `recordOutcome`: the text made of `fn`'s result, recorded with the
   * claim in the same transaction (read back by {@link appliedOutcome}).
   */
  guardedWrite<T>(token: Token, fireId: string, fn: (trx: Trx, ctx: GuardedWriteContext) => Promise<T>, issuer?: string, recordOutcome?: (result: T) => string): Promise<T>;
  /** The claim of `fireId` on the port's resource and the outcome its write recorded, or null. */
  appliedOutcome(fireId: string): Promise<AppliedOutcome | null>;
  /**
   * On a port bound to a caller's transaction whose store checks batches: the check of a whole batch
   * of fires in that transaction, a verdict per fire (see `FenceStore.checkBatchIn`). A claimed
   * fire's statements then run in the transaction with nothing more to check.
   */
  checkBatch?(fires: readonly BatchFire[]): Promise<BatchVerdict[]>;
}
