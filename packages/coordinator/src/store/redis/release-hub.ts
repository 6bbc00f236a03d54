import { withTimeout } from '@fenced/shared/internal';
import type { ReleaseHub } from '../lease-backend.js';
import { closedWhileSubscribing } from '../release-hub.js';
import { duplicateForSubscribing } from './release-listener.js';
import type { IoRedisClient } from './ioredis-client.js';

/**
 * One subscriber connection for every lease of a group (a coordinator alone opens one of its own):
 * each lease's release channel (`channelOf(lease)`) is subscribed on it, and a message is handed to
 * that lease's listener. ioredis subscribes again by itself after a reconnect.
 */
export async function openReleaseHub(redis: IoRedisClient, channelOf: (lease: string) => string, timeoutMs: number, onError: (error: unknown) => void): Promise<ReleaseHub> {
  const subscriber = duplicateForSubscribing(redis);
  const listeners = new Map<string, () => void>();
  subscriber.on('error', onError);
  subscriber.on('message', (channel: string) => listeners.get(channel)?.());
  // Redis down: the group still starts (its members stay standbys until Redis answers).
  await withTimeout(subscriber.connect(), timeoutMs, 'subscribe').catch(onError);
  let closed = false;
  return {
    async listen(lease, onRelease) {
      const channel = channelOf(lease);
      listeners.set(channel, onRelease);
      // A subscribe cut short by close() is not a failure of the store.
      await withTimeout(subscriber.subscribe(channel), timeoutMs, 'subscribe').catch((error: unknown) => closed || onError(error));
      // Closed while the subscription was being made: its connection is gone, and a subscription
      // handed out now would never hear a release (see the in-memory and SQL hubs, release-hub.ts).
      if (closed) {
        listeners.delete(channel);
        throw closedWhileSubscribing(lease);
      }
      return () => {
        listeners.delete(channel);
        void subscriber.unsubscribe(channel).catch(() => undefined);
      };
    },
    close: () => {
      closed = true;
      subscriber.disconnect();
    },
  };
}
