import { PRECONDITION_MISSED } from '../../history.js';
import type { FaultContext, SimNode } from '../fault-context.js';

// The seam between the rounds (fault-rounds.ts: when to hit, whom) and the faults (this folder: what
// a hit does, and how it heals): Jepsen's split of generators from nemeses. A fault kind is one module
// here, registered by one line in registry.ts; the scenarios name it by its `kind`.

/** A duration: milliseconds, or multiples of the lease TTL, drawn uniformly. */
export type Span =
  | { readonly ms: readonly [number, number] }
  /** Whole milliseconds in [min × TTL, max × TTL]. */
  | { readonly ttls: readonly [number, number] };

/** Draws a duration from the run's seeded source. */
export function draw(ctx: FaultContext, span: Span): number {
  if ('ms' in span) return ctx.random.int(span.ms[0], span.ms[1]);
  return ctx.random.int(Math.round(ctx.ttlMs * span.ttls[0]), Math.round(ctx.ttlMs * span.ttls[1]));
}

/** Who a replica fault hits, how the timeline labels it, and whether it stands at its failpoint. */
export interface Victim {
  readonly node: SimNode;
  readonly label: string;
  readonly atFailpoint?: boolean;
}

/** How a leader aimed at its failpoint is held there until the fault: stopped (SIGSTOP), or its event loop stalled for `ms`. */
export type HoldAt = { readonly kind: 'stop' } | { readonly kind: 'stall'; readonly ms: number };

/** A fault that hits one replica (picked by the round's target). */
export interface ReplicaFaultKind<F extends { readonly kind: string }> {
  readonly target: 'replica';
  /**
   * How the victim is held at its failpoint, decided before it is picked (a stall draws its length
   * first: a leader stalled at its failpoint is held there from the hit on).
   * @defaultValue stopped
   */
  holdAt?(ctx: FaultContext, fault: F, hold: Span): HoldAt;
  /** Injects the fault into `victim` and heals it; false when it did not take (the round is skipped). */
  inject(ctx: FaultContext, fault: F, hit: { readonly hold: Span; readonly victim: Victim; readonly heldAt: HoldAt }): Promise<boolean>;
}

/**
 * A fault that hits a shared part of the deployment: the Redis deployment (`redis`), every
 * replica's connections to the stores at once (`stores`), or the service the app's job writes
 * through (`service`). `round` is the round's number: faults with variants take variant `round`
 * (cycling).
 */
export interface DeploymentFaultKind<T extends 'redis' | 'stores' | 'service', F extends { readonly kind: string }> {
  readonly target: T;
  inject(ctx: FaultContext, fault: F, hit: { readonly holdMs: number; readonly round: number }): Promise<void>;
}

/** Matches a replica's report of a write with `outcome` (by `node`, when given). */
export const isWrite = (outcome: string, node?: string) => (n: string, r: Record<string, unknown>) => r['kind'] === 'write' && r['outcome'] === outcome && (node === undefined || n === node);

/** Matches a replica's report that it believes it leads. */
export const isElected = (_n: string, r: Record<string, unknown>) => r['kind'] === 'belief' && r['leader'] === true;

/**
 * Says in the history that a fault could not set up what its scenario needs (see `verdictOf`): a run
 * that then shows no protection at work, or a control that shows no damage, is inconclusive and says
 * why, never passed.
 */
export function preconditionMissed(ctx: FaultContext, why: string): void {
  ctx.fault(PRECONDITION_MISSED, 'start', undefined, why);
  ctx.fault(PRECONDITION_MISSED, 'end');
}
