import type { Token } from '@fenced/shared';
import type { FenceStoreKind } from './fence-store.js';

/**
 * The seam of a fast path in front of the fence store (redis/fast-path.ts is the one there is): a
 * cheap first look that may only ever speed a refusal up. The store still decides every write.
 */
export interface FastPath {
  /**
   * Compares `token` with the resource's mark in one round trip.
   * @returns true when it answered (and accepted), false when it could not answer in time.
   * @throws {StaleTokenError} when the mark is above `token`.
   */
  check(resource: string, token: Token, fireId?: string): Promise<boolean>;
  /**
   * Records a refusal the fence store decided (`via`: its kind, as operators read it in `fenced
   * status`) in the resource's stream of refusals (best effort).
   */
  recordRefusal(resource: string, token: Token, highest: Token, via: FenceStoreKind, fireId?: string): void;
  /** Raises the mark to `token` (best effort), skipped when the mark is known to be there already. */
  raise(resource: string, token: Token): Promise<void>;
  /** Deletes the mark and sets it to `token`: the audited reset after a fence was lowered. */
  reset(resource: string, token: Token): Promise<void>;
  /** Records every refusal not yet recorded, and waits for the records on their way. */
  flush(): Promise<void>;
}
