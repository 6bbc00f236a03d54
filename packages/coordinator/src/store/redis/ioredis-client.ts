import type { Cluster, Redis } from 'ioredis';

/**
 * The ioredis client the Redis store's modules call, behind the public structural `RedisClient`:
 * `redisLeases` checks at run time that it was given one, and hands it on as this type.
 */
export type IoRedisClient = Redis | Cluster;
