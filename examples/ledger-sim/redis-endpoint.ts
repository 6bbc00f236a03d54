/**
 * The replica's Redis client for the endpoint the simulation hands it: one server (behind the
 * replica's fault proxy), a Redis Cluster, or a Sentinel deployment. Short timeouts everywhere: a
 * partitioned replica must notice, not hang.
 */
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { RedisEndpoint } from '@fenced/chaos';

const TIMEOUTS = { maxRetriesPerRequest: 1, connectTimeout: 500, commandTimeout: 1000 } satisfies RedisOptions;

export function connectRedis(endpoint: RedisEndpoint): Redis | Cluster {
  switch (endpoint.kind) {
    case 'server':
      return new Redis(endpoint.url, { ...TIMEOUTS, retryStrategy: () => 100 });
    case 'cluster':
      return new Cluster([...endpoint.nodes], { redisOptions: TIMEOUTS, clusterRetryStrategy: () => 100 });
    case 'sentinel':
      // failoverDetector: the client leaves a deposed primary when a sentinel announces the switch
      // (fenced refuses a Sentinel client without it).
      return new Redis({ ...TIMEOUTS, sentinels: [...endpoint.sentinels], name: endpoint.name, failoverDetector: true, retryStrategy: () => 100 });
  }
}

/** Parses the endpoint the app passed in the environment (see app.ts). */
export function parseRedisEndpoint(text: string): RedisEndpoint {
  const endpoint = JSON.parse(text) as RedisEndpoint;
  if (!['server', 'cluster', 'sentinel'].includes(endpoint.kind)) throw new Error(`REDIS_ENDPOINT has an unknown kind: ${text}`);
  return endpoint;
}
