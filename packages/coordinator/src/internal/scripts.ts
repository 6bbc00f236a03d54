import type { Redis } from 'ioredis';
import { luaFiles as leaseLua } from '../lease/lua/generated-lua.js';
import { luaFiles as schedulerLua } from '../scheduler/lua/generated-lua.js';

/**
 * Script names carry a version, so two versions of the SDK can share one Redis without calling each
 * other's scripts (BullMQ does the same). Bump it whenever a script's contract changes.
 */
const VERSION = 'fenced1';

const scripts = {
  acquireLease: { lua: leaseLua['acquire-2'], numberOfKeys: 2 },
  renewLease: { lua: leaseLua['renew-1'], numberOfKeys: 1 },
  releaseLease: { lua: leaseLua['release-2'], numberOfKeys: 2 },
  raiseCounter: { lua: leaseLua['raise-counter-1'], numberOfKeys: 1 },
  recordFire: { lua: schedulerLua['record-fire-2'], numberOfKeys: 2 },
} as const;

export type ScriptName = keyof typeof scripts;

/** A script reply as ioredis returns it with string replies kept as strings. */
type Reply = Array<string | number>;

/** The typed commands, once registered on a client. */
export interface FencedScripts {
  acquireLease(lease: string, counter: string, nodeId: string, ttlMs: number): Promise<Reply>;
  renewLease(lease: string, value: string, ttlMs: number): Promise<Reply>;
  releaseLease(lease: string, channel: string, value: string): Promise<number>;
  raiseCounter(counter: string, floor: string): Promise<string>;
  recordFire(lease: string, fires: string, value: string, job: string, scheduledAtMs: string): Promise<number>;
}

const registered = new WeakSet<object>();

/**
 * Registers the scripts on `redis` (once per client) with ioredis `defineCommand`, which sends them
 * by SHA and reloads them on NOSCRIPT (after a `SCRIPT FLUSH` or a failover to a fresh server).
 */
export function withScripts(redis: Redis): FencedScripts {
  if (!registered.has(redis)) {
    for (const [name, { lua, numberOfKeys }] of Object.entries(scripts)) {
      redis.defineCommand(`${name}_${VERSION}`, { lua, numberOfKeys });
    }
    registered.add(redis);
  }
  const call =
    (name: ScriptName) =>
    (...args: Array<string | number>) =>
      (redis as unknown as Record<string, (...a: Array<string | number>) => Promise<unknown>>)[`${name}_${VERSION}`]!(...args);
  return {
    acquireLease: call('acquireLease') as FencedScripts['acquireLease'],
    renewLease: call('renewLease') as FencedScripts['renewLease'],
    releaseLease: call('releaseLease') as FencedScripts['releaseLease'],
    raiseCounter: call('raiseCounter') as FencedScripts['raiseCounter'],
    recordFire: call('recordFire') as FencedScripts['recordFire'],
  };
}
