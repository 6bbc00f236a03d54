import type { Cluster, Redis } from 'ioredis';

/**
 * What the coordinator runs on: an ioredis `Redis` (a single server, or a Sentinel-managed primary)
 * or an ioredis `Cluster`, from ioredis 5 or 6. Every key one lease uses shares the hash tag
 * `{lease}`, so every script runs on one slot's primary.
 */
export type RedisClient = Redis | Cluster;
