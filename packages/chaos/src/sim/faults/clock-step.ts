import { draw, type ReplicaFaultKind } from './fault-kind.js';

/**
 * The wall clock of the replica that carries the run's `stepped` clock fault jumps by each step in
 * turn (NTP stepping it, an operator setting it), held for the hold each, then set right; its
 * monotonic clock runs on undisturbed.
 */
export type ClockStepFault = { readonly kind: 'clock-step'; readonly stepsMs: readonly number[] };

export const clockStep: ReplicaFaultKind<ClockStepFault> = {
  target: 'replica',
  async inject(ctx, fault, { hold, victim: { label } }) {
    for (const stepMs of fault.stepsMs) {
      const holdMs = draw(ctx, hold);
      ctx.fault('clock step', 'start', ctx.nodes[0]!.name, `wall clock ${stepMs >= 0 ? '+' : ''}${stepMs / 1000} s for ${holdMs} ms (${label})`);
      ctx.stepClock(stepMs);
      await ctx.sleep(holdMs);
      ctx.stepClock(0);
      ctx.fault('clock step', 'end', ctx.nodes[0]!.name);
    }
    return true;
  },
};
