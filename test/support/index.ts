export { resolveServices, type ServiceUrls } from './services.js';
export { countingPool, createPool, createTestSchema, kyselyOver, uniqueSchemaName, testDatabaseUrl, waitForLockWait, withPgClient } from './postgres.js';
export { createRedis, deleteKeys, testRedisUrl, uniquePrefix, waitFor } from './redis.js';
export { isStopped, runScript, spawnNode, spawnTs, type ChildHandle } from './child.js';
export { inMemoryMetrics } from './metrics.js';
export { runCli, serveCli, type CliRun } from './cli.js';
export { createMysqlPool, createTestMysqlDatabase, testMysqlUrl } from './mysql.js';
export { countingEtcdClient, createEtcdClient, deleteEtcdPrefix, testEtcdEndpoints, uniqueEtcdPrefix } from './etcd.js';
export { expectStreamHeld, freezeUntilStuck, streamThroughFault, type StreamProgress, type WriteOutcome, type WriteStream } from './write-stream.js';
