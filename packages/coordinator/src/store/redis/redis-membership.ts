import { defineScripts, withTimeout } from '@fenced/shared/internal';
import type { GroupMembership } from '../lease-backend.js';
import type { IoRedisClient } from './ioredis-client.js';
import { luaScripts } from './lua/generated-lua.js';

/**
 * A lease group's members in a sorted set scored by the Redis server's clock (lua/heartbeat-1.lua):
 * a member is live until its last heartbeat + TTL.
 */
export function redisMembership(redis: IoRedisClient, keyPrefix: string, group: string): GroupMembership {
  const key = `${keyPrefix}:group:{${group}}:members`;
  const { heartbeat } = defineScripts(redis, { heartbeat: luaScripts.heartbeat });
  return {
    async beat(member, ttlMs, timeoutMs) {
      const [nextExpiryMs, ...members] = (await withTimeout(heartbeat(key, member, ttlMs), timeoutMs, 'heartbeat')) as [number, ...string[]];
      return { members, nextExpiryMs: Number(nextExpiryMs) };
    },
    async leave(member, timeoutMs) {
      await withTimeout(redis.zrem(key, member), timeoutMs, 'leave');
    },
  };
}
