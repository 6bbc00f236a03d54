import type { Fence, Token } from '@fenced/shared';
import type { LeaderTerm } from '../lease/coordinator-types.js';
import type { LeaseStoreKind } from '../store/lease-backend.js';
import type { FireLog } from '../store/fire-log.js';

/**
 * What the scheduler needs from the leadership that gates it: a `Coordinator`, or one lease of a
 * `LeaseGroup` (`group.lease(name)`). An interface, so the scheduler never depends on the class.
 */
export interface Leadership {
  readonly lease: string;
  readonly nodeId: string;
  /** The fences advanced at each election (the scheduler reads applied fires from them). */
  readonly fences: readonly Fence[];
  readonly store: { readonly kind: LeaseStoreKind };
  /** The lease's time to live, ms: how long a term outlives its last renewal at most. */
  readonly ttlMs: number;
  /** The current term, or null when not leading. */
  currentTerm(): LeaderTerm | null;
  isLeader(): boolean;
  /** The store server's time now (epoch ms), or null before any reply. */
  serverNow(): number | null;
  /** Ends `term` when a write of it was refused as stale (see `Coordinator.supersede`). */
  supersede(term: LeaderTerm, highest?: Token): Promise<void>;
  /** Ends `term` when the lease store refused its fire record as not the holder's (see `Coordinator.forfeit`). */
  forfeit(term: LeaderTerm): Promise<void>;
  /** The record of fires, kept beside the lease. */
  fireLog(): FireLog;
  on(event: 'elected' | 'lost', listener: () => void): unknown;
  off(event: 'elected' | 'lost', listener: () => void): unknown;
}
