import type { Token, TokenInput } from '@fenced/shared';

// The records the PostgreSQL guard reads and writes outside the write path, in a module of their
// own: the admin and inspection operations use them, and the guard built on those operations
// returns them, so none of the three imports another for its types.

/** A fire recorded in the applied-fires table. */
export interface AppliedFire {
  readonly fireId: string;
  readonly token: Token;
  readonly appliedAt: Date;
}

/** An explicit, audited lowering of a fence: recovery from a poisoned fence, never automatic. */
export interface LowerFenceRequest {
  readonly resource?: string;
  /** The new fence. */
  readonly token: TokenInput;
  /** Who does this (recorded in the audit table). */
  readonly actor: string;
  /** Why (recorded in the audit table). */
  readonly reason: string;
}
