// The deterministic simulation's invariants, each shown to fail on a history that breaks it: a
// checker that cannot fail proves nothing.
import { fireId } from '@fenced/coordinator';
import { parseToken, type FencedEvent } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { EVERY_MS, HANDOVER_BOUND_MS, judge, judgeHandovers, T0, TTL_MS, type Disturbances, type HandoverRecord } from './schedule.js';
import type { LedgerRow, WriteRecord } from './sim-checks.js';
import type { StoreHistory } from './store-history.js';

const END = T0 + 10 * EVERY_MS + 3 * TTL_MS;
const row = (i: number, token: number, node = 'n0.1'): LedgerRow => ({ fire: fireId('ledger', T0 + i * EVERY_MS), token: parseToken(token), node, scheduledAt: T0 + i * EVERY_MS, committedAt: T0 + i * EVERY_MS + 5 });
const elected = (at: number, nodeId: string, token: number) => ({ at, event: { type: 'lease.acquired', lease: 'billing', nodeId, token: parseToken(token) } as FencedEvent });
const lost = (at: number, nodeId: string, token: number) => ({ at, event: { type: 'lease.lost', lease: 'billing', nodeId, token: parseToken(token), reason: 'deadline' } as FencedEvent });
/** The store's history: n0.1 granted token 41 and renewed it, then n1.2 granted 42; no failover. */
const NO_STORE_FAULT: StoreHistory = {
  grants: new Map([
    ['n0.1@41', [{ grantedAt: T0, writes: [1, 3] }]],
    ['n1.2@42', [{ grantedAt: T0 + 500, writes: [5] }]],
  ]),
  failovers: [],
  releases: [],
};
/** The same, with a failover between the two grants to a copy taken at `copiedAt`. */
const failedOver = (copiedAt: number): StoreHistory => ({ ...NO_STORE_FAULT, failovers: [{ step: 4, at: T0 + 300, copiedAt }] });
/** Every fire from the first on, in order, with token 41: a clean ledger. */
const clean = () => Array.from({ length: 10 }, (_, i) => row(i + 1, 41));

describe("the deterministic simulation's invariants", () => {
  it('pass a clean run', () => {
    expect(judge(clean(), [elected(T0, 'n0.1', 41)], NO_STORE_FAULT, END, true)).toEqual([]);
  });

  it('fail a stale write committed after a newer token', () => {
    const ledger = clean();
    ledger.splice(5, 1, row(6, 40));
    expect(judge(ledger, [elected(T0, 'n0.1', 41)], NO_STORE_FAULT, END, true)).toEqual([
      expect.stringMatching(/^staleApplied: stale write applied: .* with token 40 by n0\.1 committed after token 41/),
      // Token 40 was never granted in this history: the model's check says so too.
      expect.stringMatching(/^model: not a step of the model: .* committed by n0\.1 with token 40, which no election granted$/),
    ]);
  });

  it('fail a fire applied twice', () => {
    expect(judge([...clean(), row(3, 41)], [elected(T0, 'n0.1', 41)], NO_STORE_FAULT, END, true)).toEqual([expect.stringMatching(/^duplicates: fire took effect twice: /)]);
  });

  it('fail a due fire that never took effect, and a run with no leader ever or none at the end', () => {
    const ledger = clean().filter((r) => r.fire !== fireId('ledger', T0 + 4 * EVERY_MS));
    expect(judge(ledger, [elected(T0, 'n0.1', 41)], NO_STORE_FAULT, END, true)).toEqual([`missed: fire never took effect: ${fireId('ledger', T0 + 4 * EVERY_MS)}`]);
    expect(judge([], [], NO_STORE_FAULT, END, false)).toEqual(['no leader was ever elected', 'no node leads at the end, after the faults healed']);
  });

  it("fail what the rest of `pnpm sim`'s checkers catch: an early effect, a dispatch by a node that did not lead, elections out of token order, a refusal the model does not allow", () => {
    const early = clean();
    early.splice(2, 1, { ...row(3, 41), committedAt: T0 + 3 * EVERY_MS - 10 });
    expect(judge(early, [elected(T0, 'n0.1', 41)], NO_STORE_FAULT, END, true)).toEqual([expect.stringMatching(/^early: fire took effect 10 ms early: /)]);
    const dispatched = { at: T0 + 300, event: { type: 'fire.dispatched', lease: 'billing', nodeId: 'n1.1', job: 'ledger', fireId: fireId('ledger', T0 + 250), token: parseToken(41) } as FencedEvent };
    expect(judge(clean(), [elected(T0, 'n0.1', 41), dispatched], NO_STORE_FAULT, END, true)).toEqual([expect.stringMatching(/^dispatchWhileLeading: dispatch by a replica that did not lead: n1\.1 /)]);
    const handedDown = [elected(T0, 'n0.1', 41), lost(T0 + 400, 'n0.1', 41), elected(T0 + 500, 'n1.2', 41)];
    expect(judge(clean(), handedDown, NO_STORE_FAULT, END, true)).toEqual([expect.stringMatching(/^electionOrder: election out of token order: n1\.2 elected with token 41/)]);
    const refused: WriteRecord = { at: T0 + 600, node: 'n0.1', fireId: fireId('ledger', T0 + 500), token: 41n, outcome: 'stale' };
    expect(judge(clean(), [elected(T0, 'n0.1', 41)], NO_STORE_FAULT, END, true, [], [], [refused])).toEqual([expect.stringMatching(/^model: not a step of the model: .* refused as stale with token 41, the highest token granted or committed/)]);
  });

  it("fail overlapping beliefs, except where a failover lost the earlier term's grant or renewal", () => {
    const overlapping = [elected(T0, 'n0.1', 41), elected(T0 + 500, 'n1.2', 42), lost(T0 + 600, 'n0.1', 41)];
    expect(judge(clean(), overlapping, NO_STORE_FAULT, END, true)).toEqual([expect.stringMatching(/^n1\.2 elected at \+500 ms while n0\.1 led/)]);
    // The store went back to a copy from before the grant (step 0: a restart without persistence),
    // or from between the grant and the renewal: the store let n0.1's lease go early, not the SDK.
    expect(judge(clean(), overlapping, failedOver(0), END, true)).toEqual([]);
    expect(judge(clean(), overlapping, failedOver(2), END, true)).toEqual([]);
    // A copy with the renewal in it lost nothing of n0.1's: the overlap is the SDK's.
    expect(judge(clean(), overlapping, failedOver(3), END, true)).toEqual([expect.stringMatching(/^n1\.2 elected at \+500 ms while n0\.1 led/)]);
    // A failover after both grants excuses nothing either.
    expect(judge(clean(), overlapping, { ...NO_STORE_FAULT, failovers: [{ step: 6, at: T0 + 550, copiedAt: 0 }] }, END, true)).toEqual([expect.stringMatching(/^n1\.2 elected/)]);
    // A store that lost its counter granted n0.1 token 41 again, later (step 7): the overlap at +500
    // ms is judged by the grant it announced, the first.
    const regranted: StoreHistory = { grants: new Map([...NO_STORE_FAULT.grants, ['n0.1@41', [{ grantedAt: T0, writes: [1, 3] }, { grantedAt: T0 + 900, writes: [7] }]]]), failovers: [{ step: 4, at: T0 + 300, copiedAt: 0 }], releases: [] };
    expect(judge(clean(), overlapping, regranted, END, true)).toEqual([]);
    const handedOver = [elected(T0, 'n0.1', 41), lost(T0 + 400, 'n0.1', 41), elected(T0 + 500, 'n1.2', 42)];
    expect(judge(clean(), handedOver, NO_STORE_FAULT, END, true)).toEqual([]);
  });

  it("excuse an overlap where the earlier leader's clock ran slow during its term, and no other", () => {
    const overlapping = [elected(T0, 'n0.1', 41), elected(T0 + 500, 'n1.2', 42), lost(T0 + 600, 'n0.1', 41)];
    const overlap = [expect.stringMatching(/^n1\.2 elected at \+500 ms while n0\.1 led/)];
    // n0's machine clock ran slow from +100 to +300 ms, inside n0.1's term: it counted its lease long.
    expect(judge(clean(), overlapping, NO_STORE_FAULT, END, true, [{ slot: 0, from: T0 + 100, to: T0 + 300 }])).toEqual([]);
    // The new leader's clock, another machine's, or a stretch after the overlap excuses nothing.
    expect(judge(clean(), overlapping, NO_STORE_FAULT, END, true, [{ slot: 1, from: T0 + 100, to: T0 + 300 }])).toEqual(overlap);
    expect(judge(clean(), overlapping, NO_STORE_FAULT, END, true, [{ slot: 2, from: T0, to: END }])).toEqual(overlap);
    expect(judge(clean(), overlapping, NO_STORE_FAULT, END, true, [{ slot: 0, from: T0 + 501, to: T0 + 900 }])).toEqual(overlap);
    // Nor a stretch that ended before its term began (n0.1's grant, at T0).
    expect(judge(clean(), [elected(T0 + 200, 'n0.1', 41), elected(T0 + 500, 'n1.2', 42)], NO_STORE_FAULT, END, true, [{ slot: 0, from: T0 - 300, to: T0 - 100 }])).toEqual(overlap);
    // Its term began at the grant, not when the reply reached it: a stretch in between counts (the
    // node counts its lease from when it sent the acquire).
    expect(judge(clean(), [elected(T0 + 200, 'n0.1', 41), elected(T0 + 500, 'n1.2', 42)], NO_STORE_FAULT, END, true, [{ slot: 0, from: T0, to: T0 + 100 }])).toEqual([]);
  });

  it('excuse an overlap where the earlier leader was paused at the election, if it dropped its belief on the first turn after it ran again', () => {
    const overlapping = [elected(T0, 'n0.1', 41), elected(T0 + 500, 'n1.2', 42), lost(T0 + 600, 'n0.1', 41)];
    const overlap = [expect.stringMatching(/^n1\.2 elected at \+500 ms while n0\.1 led/)];
    const judged = (pausedSpans: Parameters<typeof judge>[9]) => judge(clean(), overlapping, NO_STORE_FAULT, END, true, [], [], [], [], pausedSpans);
    // Paused from +100 to +599 ms: the lost belief at +600 is the first turn after it.
    expect(judged([{ node: 'n0.1', from: T0 + 100, to: T0 + 599 }])).toEqual([]);
    // Ran again at +590 and believed on until +600: its deadline's check did not run on resume.
    expect(judged([{ node: 'n0.1', from: T0 + 100, to: T0 + 590 }])).toEqual([expect.stringMatching(/^n0\.1, paused from \+100 to \+590 ms, still believed it led after it ran again \(dropped at \+600 ms\)$/)]);
    // Never dropped at all.
    expect(judge(clean(), overlapping.slice(0, 2), NO_STORE_FAULT, END, true, [], [], [], [], [{ node: 'n0.1', from: T0 + 100, to: T0 + 599 }])).toEqual([expect.stringMatching(/still believed it led after it ran again \(never dropped\)$/)]);
    // Another node's pause, another incarnation's, or a pause over before the election excuses nothing.
    expect(judged([{ node: 'n1.2', from: T0 + 100, to: T0 + 599 }])).toEqual(overlap);
    expect(judged([{ node: 'n0.2', from: T0 + 100, to: T0 + 599 }])).toEqual(overlap);
    expect(judged([{ node: 'n0.1', from: T0 + 100, to: T0 + 499 }])).toEqual(overlap);
  });

  describe('a graceful handover', () => {
    // n0.1 (token 41) stopped at +1000 ms and its release reached the store at +1003; n1.2's and
    // n2.3's acquires were held until +1100 and +1200 ms: n1.2 is free first, at +1100 ms.
    const handover = (): HandoverRecord => ({
      at: T0 + 990,
      leader: 'n0.1',
      term: 'n0.1@41',
      stoppedAt: T0 + 1000,
      held: [
        { node: 'n1.2', slot: 1, sentAt: T0 + 995, repliesAt: T0 + 1100 },
        { node: 'n2.3', slot: 2, sentAt: T0 + 998, repliesAt: T0 + 1200 },
      ],
    });
    const grantedAt = (at: number): StoreHistory => ({
      grants: new Map([
        ['n0.1@41', [{ grantedAt: T0, writes: [1] }]],
        ['n1.2@42', [{ grantedAt: at, writes: [3] }]],
      ]),
      failovers: [],
      releases: [{ key: 'n0.1@41', at: T0 + 1003 }],
    });
    const none: Disturbances = { paused: [], spikes: [], exits: [] };
    const late = expect.stringMatching(/^handover: n0\.1 released at \+1003 ms and n1\.2 and n2\.3 were ready from \+1100 ms, yet nobody was granted the lease by \+1150 ms \(next grant at \+1350 ms\)$/);

    it('passes a successor granted within the bound of the first standby free, and fails one a retry interval later', () => {
      expect(judgeHandovers([handover()], grantedAt(T0 + 1100 + HANDOVER_BOUND_MS), none)).toEqual({ failures: [], notJudged: [], judged: 1 });
      expect(judgeHandovers([handover()], grantedAt(T0 + 1350), none)).toEqual({ failures: [late], notJudged: [], judged: 1 });
      // A grant before the release is the old term's, not a successor.
      expect(judgeHandovers([handover()], grantedAt(T0 + 1002), none).failures).toEqual([expect.stringMatching(/\(nor later\)$/)]);
    });

    it('counts from the release when the standbys were free before it', () => {
      const early: HandoverRecord = { ...handover(), held: [{ node: 'n1.2', slot: 1, sentAt: T0 + 900, repliesAt: T0 + 950 }] } as HandoverRecord;
      expect(judgeHandovers([early], grantedAt(T0 + 1003 + HANDOVER_BOUND_MS), none).failures).toEqual([]);
      expect(judgeHandovers([early], grantedAt(T0 + 1004 + HANDOVER_BOUND_MS), none).failures).toEqual([expect.stringMatching(/ready from \+1003 ms/)]);
    });

    it('leaves out a standby paused, crashed or slowed meanwhile, and judges by the others', () => {
      // n1.2 paused: n2.3, free at +1200 ms, is the one judged.
      const paused: Disturbances = { ...none, paused: [{ node: 'n1.2', from: T0 + 1050, to: T0 + 1400 }] };
      expect(judgeHandovers([handover()], grantedAt(T0 + 1240), paused)).toEqual({ failures: [], notJudged: [], judged: 1 });
      expect(judgeHandovers([handover()], grantedAt(T0 + 1260), paused).failures).toEqual([expect.stringMatching(/n2\.3 was ready from \+1200 ms/)]);
      // Both out of the running: crashed, and replies delayed by a fault.
      const out: Disturbances = { paused: [], spikes: [{ slot: 2, from: T0 + 1100, to: T0 + 2000 }], exits: [{ at: T0 + 1080, node: 'n1.2' }] };
      expect(judgeHandovers([handover()], grantedAt(T0 + 1350), out)).toEqual({ failures: [], notJudged: [expect.stringMatching(/not judged: no standby was ready/)], judged: 0 });
      // Another node's crash, or a pause over before the hold, leaves the judgement as it was.
      const unrelated: Disturbances = { paused: [{ node: 'n1.2', from: T0 + 100, to: T0 + 900 }], spikes: [{ slot: 0, from: T0 + 1000, to: T0 + 2000 }], exits: [{ at: T0 + 1080, node: 'n1.1' }] };
      expect(judgeHandovers([handover()], grantedAt(T0 + 1350), unrelated).failures).toEqual([late]);
    });

    it('is not judged with no leader, no release of the stopped term, or a failover of the lease store in its window', () => {
      expect(judgeHandovers([{ at: T0 + 990, leader: null }], grantedAt(T0 + 1350), none).notJudged).toEqual([expect.stringMatching(/not judged: no node led/)]);
      expect(judgeHandovers([handover()], { ...grantedAt(T0 + 1350), releases: [{ key: 'n0.1@40', at: T0 + 1003 }] }, none).notJudged).toEqual([expect.stringMatching(/n0\.1 released nothing/)]);
      expect(judgeHandovers([handover()], { ...grantedAt(T0 + 1350), releases: [{ key: 'n0.1@41', at: T0 + 900 }] }, none).notJudged).toEqual([expect.stringMatching(/n0\.1 released nothing/)]);
      expect(judgeHandovers([handover()], { ...grantedAt(T0 + 1350), failovers: [{ step: 2, at: T0 + 1120, copiedAt: 0 }] }, none)).toEqual({ failures: [], notJudged: [expect.stringMatching(/failed over within it/)], judged: 0 });
      // A failover before the release is no excuse.
      expect(judgeHandovers([handover()], { ...grantedAt(T0 + 1350), failovers: [{ step: 2, at: T0 + 1001, copiedAt: 0 }] }, none).failures).toEqual([late]);
    });
  });
});
