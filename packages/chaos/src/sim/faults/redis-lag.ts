import type { HistoryEvent } from '../../history.js';
import { draw, preconditionMissed, type ReplicaFaultKind, type Span } from './fault-kind.js';

/**
 * The replica's link to Redis slowed, not cut: every request and every reply `delay` late for the
 * hold (a congested network, an overloaded Redis host). Its renewals reach Redis after the lease ran
 * out, so another replica is elected while this one still works: it must stop believing it leads by
 * the deadline it counted from its send (the late replies must not extend it), and its fire records,
 * late, must not count for a term that is over. Nothing else of it is slowed: its writes to
 * PostgreSQL go out at once.
 */
export type RedisLagFault = { readonly kind: 'redis-lag'; readonly delay: Span };

export const redisLag: ReplicaFaultKind<RedisLagFault> = {
  target: 'replica',
  async inject(ctx, fault, { hold, victim: { node, label, atFailpoint = false } }) {
    if (node.redisProxy === undefined) return false;
    const delayMs = draw(ctx, fault.delay);
    const holdMs = draw(ctx, hold);
    ctx.fault('redis lag', 'start', node.name, `${label}: Redis ${delayMs} ms away for ${holdMs} ms`, ['redis']);
    const from = Date.now();
    ctx.setProxies(node, { redis: { kind: 'delay', delayMs } });
    // Held at its failpoint (a fire dispatched, its record not sent), it sends the record into the lag.
    if (node.process.paused) ctx.resume(node);
    await ctx.sleep(holdMs);
    ctx.setProxies(node, { redis: { kind: 'pass' } });
    ctx.fault('redis lag', 'end', node.name);
    const missed = lagMissedItsPrecondition(ctx.history.events, { victim: node.name, from, to: Date.now(), delayMs, heldDispatch: atFailpoint });
    if (missed !== undefined) preconditionMissed(ctx, `redis lag on ${node.name}: ${missed}`);
    return true;
  },
};

/**
 * Why a lag did not set up what the scenario is about, or undefined when it did. It did when another
 * replica was elected during the lag and the victim dispatched a fire whose record, sent after the
 * dispatch and `delayMs` late, reached Redis only after that election: a record that cannot count, so
 * the fire is due again under the next term (applied twice without the guard). A victim held at
 * `scheduler.dispatched-before-record` (`heldDispatch`) sends the record of its last dispatch before
 * the lag only once let go, into the lag. Judged from what the supervisor saw, never from whether the
 * SDK refused anything: a lag that missed is said to have missed whatever the SDK does. The election
 * is the latest moment the victim's lease can have run out, so a record landing between the two is
 * not counted: conservative, never generous.
 */
export function lagMissedItsPrecondition(
  events: readonly HistoryEvent[],
  lag: { readonly victim: string; readonly from: number; readonly to: number; readonly delayMs: number; readonly heldDispatch?: boolean },
): string | undefined {
  const during = events.filter((e) => e.at >= lag.from && e.at <= lag.to);
  const election = during.find((e): e is Extract<HistoryEvent, { kind: 'belief' }> => e.kind === 'belief' && e.leader && e.node !== lag.victim);
  if (election === undefined) return `no other replica was elected during the ${lag.to - lag.from} ms lag`;
  const isVictims = (e: HistoryEvent): e is Extract<HistoryEvent, { kind: 'dispatch' }> => e.kind === 'dispatch' && e.node === lag.victim;
  // Each dispatch with the moment its record left: at once, or (held) when the lag began.
  const held = lag.heldDispatch === true ? events.filter((e) => e.at < lag.from && isVictims(e)).at(-1) : undefined;
  const sent = [...(held === undefined ? [] : [lag.from]), ...during.filter(isVictims).map((d) => d.at)];
  if (sent.some((at) => at + lag.delayMs >= election.at)) return undefined;
  return `${election.node} was elected ${election.at - lag.from} ms into the lag, and none of the ${sent.length} fires ${lag.victim} dispatched ${held === undefined ? 'during it' : 'into it'} had its record reach Redis after that`;
}
