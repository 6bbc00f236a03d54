/**
 * What the coordinator runs on: an ioredis `Redis` (a single server, or a Sentinel-managed primary)
 * or an ioredis `Cluster`, from ioredis 5 or 6. Every key one lease uses shares the hash tag
 * `{lease}`, so every script runs on one slot's primary.
 *
 * Spelled structurally (a few members every ioredis client has), not imported from `ioredis`:
 * ioredis is an optional peer of this package, and a declaration file that imports a package the
 * project does not have fails a strict type check (`skipLibCheck: false`) of every project on
 * PostgreSQL or etcd alone. Both majors' `Redis` and `Cluster` fit it as they are
 * (`test/redis/ioredis-major.test.ts`); `redisLeases` checks at run time that it was given one.
 */
export interface RedisClient {
  readonly isCluster: boolean;
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void;
  duplicate(): unknown;
}
