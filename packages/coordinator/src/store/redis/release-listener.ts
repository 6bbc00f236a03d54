import type { Cluster, Redis } from 'ioredis';
import type { IoRedisClient } from './ioredis-client.js';
import { withTimeout } from '@fenced/shared/internal';
import type { ReleaseListener } from '../lease-store.js';

/**
 * Standbys listen for releases, so a graceful handover takes a round trip, not a TTL. Resolves once
 * the subscription is in place (a standby that starts just before the leader steps down must hear
 * the release, not wait for its next poll), or after `timeoutMs` when Redis is down: a node must
 * still start, as a standby. After a reconnect it subscribes again.
 */
export async function listenForReleases(
  redis: IoRedisClient,
  channel: string,
  timeoutMs: number,
  handlers: { onRelease: () => void; onError: (error: unknown) => void; onListening?: ((mode: 'notify', reason: string) => void) | undefined },
): Promise<ReleaseListener> {
  const subscriber = duplicateForSubscribing(redis);
  subscriber.on('error', handlers.onError);
  subscriber.on('message', handlers.onRelease);
  const listening = () => handlers.onListening?.('notify', 'Redis pub/sub');
  /** Whether the first subscription has been made or given up on: a later `ready` is a reconnect. */
  let started = false;
  // Every connection subscribes when ready; one after the start says so again (a new connection).
  subscriber.on('ready', () => void subscriber.subscribe(channel).then(() => started && listening(), () => undefined));
  const subscribed = async () => {
    await subscriber.connect();
    await subscriber.subscribe(channel);
    listening();
  };
  await withTimeout(subscribed(), timeoutMs, 'subscribe').catch(handlers.onError);
  started = true;
  return { close: () => subscriber.disconnect() };
}

/**
 * A second connection with the client's settings, connected by us (`lazyConnect`: an eager connect
 * would race our own `connect()`) and retrying forever. The two client kinds take their overrides
 * differently: `Cluster.duplicate(startupNodes, options)`, `Redis.duplicate(options)`.
 */
export function duplicateForSubscribing(redis: IoRedisClient): IoRedisClient {
  if (redis.isCluster) return (redis as Cluster).duplicate(undefined, { lazyConnect: true });
  return (redis as Redis).duplicate({ lazyConnect: true, maxRetriesPerRequest: null });
}
