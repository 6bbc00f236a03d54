import type { Cluster, Redis } from 'ioredis';

/**
 * What the Redis side of the guard runs on: an ioredis `Redis` (a single server, or a
 * Sentinel-managed primary) or an ioredis `Cluster`, from ioredis 5 or 6.
 */
export type RedisClient = Redis | Cluster;
