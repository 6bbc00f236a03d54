import type { Token } from '@fenced/shared';
import { storedToken, withTimeout } from '@fenced/shared/internal';
import type { IoRedisClient } from './ioredis-client.js';
import { leaseScripts } from './lease-scripts.js';
import type { LeaseKeys } from './lease-keys.js';
import type { AcquireReply, LeaseStore } from '../lease-store.js';
import { replyOf } from '../in-flight.js';
import { formatLeaseValue, parseLeaseValue } from '../lease-value.js';
import { listenForReleases } from './release-listener.js';
import { primaryConfirmer } from './sentinel-primary.js';

/** How many elections the lease's stream keeps, for `fenced status` and `fenced doctor`. */
const ELECTIONS_KEPT = 32;

/**
 * The lease in Redis: a key holding `<token>:<nodeId>` with the TTL, the token minted from a counter
 * by the acquire script (lua/), a release channel, and a capped stream of elections. On a Sentinel
 * client every grant and renew counts only when the sentinels name the server it came from.
 */
export function redisLeaseStore(redis: IoRedisClient, keys: LeaseKeys, nodeId: string, confirmTimeoutMs: number): LeaseStore {
  const scripts = leaseScripts(redis);
  const primary = primaryConfirmer(redis, confirmTimeoutMs);

  return {
    async acquire(ttlMs, timeoutMs, inFlight): Promise<AcquireReply> {
      const reply = await replyOf(withTimeout(scripts.acquire(keys.lease, keys.counter, nodeId, ttlMs), timeoutMs, 'acquire'), inFlight);
      // Where the reply came from, read as it arrived: the sentinels are asked about it later.
      const repliedAt = performance.now();
      const repliedFrom = primary?.connected();
      if (reply[0] !== 1) {
        const [, holder, pttl, sec, usec] = reply;
        const held = typeof holder === 'string' ? parseLeaseValue(holder) : null;
        return {
          won: false,
          holder: held === null ? null : { value: holder as string, token: held.token, ours: held.nodeId === nodeId },
          remainingMs: Math.max(Number(pttl), 0),
          time: { sec: sec!, usec: usec! },
        };
      }
      const [, tokenText, sec, usec] = reply;
      const token = storedToken(String(tokenText));
      return {
        won: true,
        token,
        leaseValue: formatLeaseValue(token, nodeId),
        time: { sec: sec!, usec: usec! },
        confirmServer: async () => (primary === undefined || (await primary.names(repliedFrom, repliedAt)) ? null : new NotOnPrimaryError(repliedFrom)),
      };
    },

    async renew(leaseValue, ttlMs, timeoutMs, inFlight) {
      const reply = await replyOf(withTimeout(scripts.renew(keys.lease, leaseValue, ttlMs), timeoutMs(), 'renew'), inFlight);
      const repliedAt = performance.now();
      const repliedFrom = primary?.connected();
      if (primary !== undefined && reply[0] === 1 && !(await withTimeout(primary.names(repliedFrom, repliedAt), timeoutMs(), 'confirm primary'))) {
        throw new NotOnPrimaryError(repliedFrom);
      }
      return { renewed: reply[0] === 1, time: { sec: reply[1]!, usec: reply[2]! } };
    },

    async release(leaseValue, timeoutMs) {
      return (await withTimeout(scripts.release(keys.lease, keys.released, leaseValue), timeoutMs, 'release')) === 1;
    },

    async raiseCounter(floor: Token, timeoutMs) {
      await withTimeout(scripts.raiseCounter(keys.counter, floor.toString()), timeoutMs, 'raise counter');
    },

    recordElection({ token, ttlMs, fences, regressed }) {
      redis
        .xadd(keys.elections, 'MAXLEN', String(ELECTIONS_KEPT), '*', 'token', token.toString(), 'node', nodeId, 'ttl', String(ttlMs), 'fences', String(fences), 'regressed', regressed ? '1' : '0')
        .catch(() => {});
    },

    listenForReleases: (timeoutMs, onRelease, onError, onListening) => listenForReleases(redis, keys.released, timeoutMs, { onRelease, onError, onListening }),
  };
}

/** A reply came from a server that the sentinels do not all name as the primary. */
export class NotOnPrimaryError extends Error {
  /** The server (`host:port`) the reply came from; undefined when its connection had closed. */
  readonly server: string | undefined;

  constructor(server: string | undefined) {
    super(`the reply came from ${server ?? 'a closed connection'}, not the primary every sentinel names (a failover in progress)`);
    this.name = 'NotOnPrimaryError';
    this.server = server;
  }
}
