import type { ScenarioName } from '@fenced/chaos';

/**
 * Seeds that once found a bug, kept as named regression cases: each replays its scenario's fault
 * schedule in the test suite (guarded), which must stay clean.
 */
export const regressions: ReadonlyArray<{ name: string; scenario: ScenarioName; seed: number; found: string }> = [
  {
    name: 'a term that ended mid-handler shifted the next term’s pending fire',
    scenario: 'redis-restart',
    seed: 1,
    found:
      'A fire whose write was refused after Redis restarted was planned again by the new term, and the old term’s drain, finishing late, removed it from the new pending list: the fire was lost.',
  },
  {
    name: 'a leader killed before its first dispatch left no baseline',
    scenario: 'clock-skew',
    seed: 1,
    found: 'The first leader was killed before it recorded anything; its successor saw no record, started from its own now, and lost the fires in between.',
  },
  {
    name: 'the node that repaired the counter was not the one elected next',
    scenario: 'redis-restart',
    seed: 43,
    found:
      'After Redis restarted, one standby found the fence ahead, repaired the counter and released; another won the re-election without seeing the regression, took the empty fires hash for a first run and lost the fires of the outage. The hash now carries an initialized mark.',
  },
];
