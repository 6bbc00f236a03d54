/**
 * What the Redis side of the guard runs on: an ioredis `Redis` (a single server, or a
 * Sentinel-managed primary) or an ioredis `Cluster`, from ioredis 5 or 6.
 *
 * Spelled structurally (the few members the guard calls), not imported from `ioredis`: ioredis is an
 * optional peer of this package, and a declaration file that imports a package the project does not
 * have fails a strict type check (`skipLibCheck: false`) of every project on PostgreSQL alone. Both
 * majors' `Redis` and `Cluster` fit it as they are; `test/redis/ioredis-major.test.ts` checks that.
 */
export interface RedisClient {
  readonly isCluster: boolean;
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void;
  get(key: string): Promise<string | null>;
  del(key: string): Promise<number>;
  duplicate(): unknown;
}
