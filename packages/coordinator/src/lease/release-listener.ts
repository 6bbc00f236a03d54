import type { Redis } from 'ioredis';
import { withTimeout } from '@fenced/shared/internal';

/** A subscription to a lease's release channel, on its own connection. */
export interface ReleaseListener {
  close(): void;
}

/**
 * Standbys listen for releases, so a graceful handover takes a round trip, not a TTL. Resolves once
 * the subscription is in place (a standby that starts just before the leader steps down must hear
 * the release, not wait for its next poll), or after `timeoutMs` when Redis is down: a node must
 * still start, as a standby. After a reconnect it subscribes again.
 */
export async function listenForReleases(
  redis: Redis,
  channel: string,
  timeoutMs: number,
  handlers: { onRelease: () => void; onError: (error: unknown) => void },
): Promise<ReleaseListener> {
  const subscriber = redis.duplicate({ lazyConnect: true, maxRetriesPerRequest: null });
  subscriber.on('error', handlers.onError);
  subscriber.on('message', handlers.onRelease);
  subscriber.on('ready', () => void subscriber.subscribe(channel).catch(() => undefined));
  const subscribed = async () => {
    await subscriber.connect();
    await subscriber.subscribe(channel);
  };
  await withTimeout(subscribed(), timeoutMs, 'subscribe').catch(handlers.onError);
  return { close: () => subscriber.disconnect() };
}
