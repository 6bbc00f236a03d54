import { describe, expect, it } from 'vitest';
import type { HistoryEvent } from '../../history.js';
import { counterMetSince, grantsRefusedOn, highestElectedBefore, unmetCounter } from './primary-failover.js';

const elected = (at: number, token: string, node = 'r1'): HistoryEvent => ({ at, kind: 'belief', node, leader: true, token });
const lost = (at: number, node = 'r1'): HistoryEvent => ({ at, kind: 'belief', node, leader: false, reason: 'deadline' });
const repair = (at: number, token: string, node = 'r2'): HistoryEvent => ({ at, kind: 'repair', node, token });

describe('highestElectedBefore', () => {
  it('is the highest token any election minted before the instant, whatever their order', () => {
    expect(highestElectedBefore([elected(100, '3'), elected(200, '12'), elected(300, '4'), elected(400, '40')], 400)).toBe(12n);
    expect(highestElectedBefore([lost(100), repair(150, '9')], 1_000)).toBe(0n);
  });
});

describe('counterMetSince', () => {
  // Tokens 3 and 4 minted on the primary only, then the freeze at 1000: the promoted server's counter is at 2.
  const before = [elected(100, '3'), elected(200, '4')];

  it('is undefined until an election since the instant', () => {
    expect(counterMetSince([...before, lost(1_100)], 1_000, 4n)).toBeUndefined();
  });

  it('is met by a repair (guarded: the fence refused the token) or a term at or below the highest used (control)', () => {
    expect(counterMetSince([...before, repair(1_200, '3'), elected(1_210, '5')], 1_000, 4n)).toBe(true);
    expect(counterMetSince([...before, elected(1_200, '3', 'r2')], 1_000, 4n)).toBe(true);
    expect(counterMetSince([...before, elected(1_200, '4', 'r2')], 1_000, 4n)).toBe(true);
  });

  it('is missed when the first election led above every token used (on the deposed primary), whatever came after', () => {
    expect(counterMetSince([...before, elected(1_200, '5'), repair(1_300, '3')], 1_000, 4n)).toBe(false);
    // From a later instant, the later repair counts.
    expect(counterMetSince([...before, elected(1_200, '5'), repair(1_300, '3')], 1_250, 4n)).toBe(true);
  });

  it('counts nothing before the instant', () => {
    expect(counterMetSince([...before, repair(900, '2')], 1_000, 4n)).toBeUndefined();
  });
});

describe('grantsRefusedOn', () => {
  const refused = (at: number, server: string | undefined, operation = 'acquire'): HistoryEvent => ({ at, kind: 'deposed', node: 'r2', operation, ...(server === undefined ? {} : { server }) });

  it('counts the grants from that server the primary confirmation refused since the instant, and nothing else', () => {
    const events = [refused(900, '127.0.0.1:7001'), refused(1_100, '127.0.0.1:7001'), refused(1_200, '127.0.0.1:7001'), refused(1_300, '127.0.0.1:7000'), refused(1_400, '127.0.0.1:7001', 'renew'), refused(1_500, undefined), elected(1_600, '5')];
    expect(grantsRefusedOn(events, 1_000, '127.0.0.1:7001')).toBe(2);
    expect(grantsRefusedOn(events, 1_000, undefined)).toBe(0);
  });
});

describe('unmetCounter', () => {
  it('is a missed precondition when the promoted server lost no token', () => {
    expect(unmetCounter(4n, 4n, 0)).toMatch(/counter stood at 4 when it took over, at or above every token used \(4\): the failover lost no token/);
  });

  it('is a missed precondition when refused grants, one token each, took the counter past every token used', () => {
    // Seen: the counter at 2, tokens 3 and 4 used on the deposed primary, two grants refused on the promoted server.
    expect(unmetCounter(2n, 4n, 2)).toMatch(/stood at 2 .* 2 grants there were refused before any fence/);
    expect(unmetCounter(2n, 4n, 3)).toBeDefined();
  });

  it('is nothing (the run is judged toothless) when the counter was behind and too few grants were refused to explain it', () => {
    expect(unmetCounter(2n, 4n, 1)).toBeUndefined();
    expect(unmetCounter(2n, 4n, 0)).toBeUndefined();
    expect(unmetCounter(undefined, 4n, 5)).toBeUndefined();
  });
});
