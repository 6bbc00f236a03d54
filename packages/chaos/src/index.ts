export { startRedisServer, type RedisServerProcess, type RedisServerOptions } from './redis/redis-server.js';
export { freePort, waitForPort } from './ports.js';
export { startRedisTopology, type RedisTopology } from './redis/redis-topology.js';
export { redisCommand, redisCommands } from './redis/redis-command.js';
export { startRedisCluster, parseClusterNodes, type ClusterNodeInfo, type RedisCluster, type RedisClusterOptions } from './redis/redis-cluster.js';
export { startRedisSentinel, type RedisSentinel, type RedisSentinelOptions } from './redis/redis-sentinel.js';
export { startFaultProxy, type FaultProxy, type ProxyMode } from './fault-proxy.js';
export { managedProcess, type ManagedProcess, type ProcessLine, type ProcessSpec } from './process/managed-process.js';
export { clockStepText, faketimeEnv, findLibfaketime, type ClockFault } from './faketime.js';
export { seededRandom, type Random } from './random.js';
export { History, type Effect, type HistoryEvent, type WriteOutcome } from './history.js';
export { checkRun, leadershipIntervals, leadershipOverlaps, maxDispatchGap, type CheckInput, type CheckResult, type FenceState, type OverlapWindow } from './checker/check-run.js';
export { INVARIANTS, noDuplicateEffect, noEarlyEffect, noMissedFire, noStaleEffect, type EffectMark, type Invariant, type InvariantResult } from './checker/invariants.js';
export { dispatchOnlyWhileLeading, electionsInTokenOrder } from './checker/lease-invariants.js';
export {
  dispatchWithinOwnTerm,
  dueFiresDispatchedInTime,
  failedWritesApplyLater,
  faultIntervals,
  markNotAheadOfFence,
  noEarlyDispatch,
  noHandlerForStaleToken,
  noHandlerWhileGuardUnreachable,
  noLongSilence,
  uncoveredSilences,
} from './checker/layer-invariants.js';
export { verdictOf, timesExercised, type JudgedRun, type Verdict } from './report/verdict.js';
export { INCONCLUSIVE_STARVATION_MS, starvedIntervals, SUPERVISOR } from './checker/starvation.js';
export { startStarvationProbe } from './sim/starvation-probe.js';
export { hasSettled } from './sim/quiescence.js';
export { leaseStoresOf, scenarios, SCENARIO_NAMES, type Exercise, type Protection, type Scenario, type ScenarioName } from './sim/scenarios.js';
export { runFaultRounds, type FaultRound, type Hit, type LeaderTarget, type PostgresDownVariant, type PrimaryFailoverVariant, type RedisFault, type StoresFault, type ReplicaFault, type ReplicaTarget, type Setup, type Span } from './sim/fault-rounds.js';
export { FaultContext, type SimNode } from './sim/fault-context.js';
export { recoveryBoundMs, runScenario, scenarioLabel, type RunOptions, type RunResult, type RunStatus } from './sim/run-scenario.js';
export { LEASE_STORES } from "./sim/sim-app.js";
export type { LeaseStoreName, NodeContext, RedisEndpoint, RunContext, ServiceFault, SimApp, SimMode } from './sim/sim-app.js';
export { startSimRedis, type RedisKind, type ReplicatedRedis, type SimRedis } from './sim/sim-redis.js';
export { renderHtmlReport, resultTableRows, RESULT_COLUMNS, COLUMN_DEFINITIONS, type ReportRun } from './report/html-report.js';
export { textTable } from './report/text-table.js';
export { runSimCli, scenariosOf, type CliIo, type DatabaseResolver } from './cli/sim-cli.js';
export { resolvePostgres, tcpAnswers, ServiceUnavailableError, DEFAULT_DATABASE_URL } from './postgres-url.js';
export { startPostgresServer, postgresBinDir, type PostgresServerProcess, type PostgresServerOptions } from './postgres/postgres-server.js';
export { startPostgresCluster, type PostgresCluster } from './postgres/postgres-cluster.js';
export { startPgBouncer, hasPgBouncer, type PgBouncerProcess, type PgBouncerOptions } from './postgres/pgbouncer.js';
export { startMariadbServer, mariadbBinary, type MariadbServerProcess, type MariadbServerOptions } from './mysql/mariadb-server.js';
export { createTestCertificates, type TestCertificates, type CertificateFiles } from './tls/test-certificates.js';
export { startEtcdCluster, etcdBinary, type EtcdCluster, type EtcdClusterOptions, type EtcdMember } from './etcd/etcd-cluster.js';
export type { EtcdMemberStatus } from './etcd/etcd-api.js';
export { connectionsTo } from './process/socket-owner.js';
