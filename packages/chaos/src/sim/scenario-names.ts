// The scenarios' names apart from their definitions: the app contract (sim-app.ts) names scenarios,
// and the definitions import the fault rounds, which import the context the app contract feeds.

export const SCENARIO_NAMES = [
  'pause',
  'stall',
  'crash',
  'partition',
  'postgres-down',
  'catch-up-failover',
  'redis-failover',
  'redis-restart',
  'clock-skew',
  'clock-step',
  'slow-clock',
  'cluster-failover',
  'sentinel-failover',
  'freeze-in-commit',
  'connection-killed',
  'postgres-restart',
  'postgres-failover',
  'redis-lag',
  'etcd-leader-loss',
  'service-down',
  'pool-exhausted',
] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];
