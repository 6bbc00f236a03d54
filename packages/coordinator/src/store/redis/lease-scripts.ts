import { defineScripts, sharedLuaScripts, type ScriptHost } from '@fenced/shared/internal';
import { luaScripts } from './lua/generated-lua.js';

/** A script reply as ioredis returns it with string replies kept as strings. */
type Reply = Array<string | number>;

/** The lease's scripts on one client, typed (the Lua files beside this say what each returns). */
export interface LeaseScripts {
  acquire(lease: string, counter: string, nodeId: string, ttlMs: number): Promise<Reply>;
  renew(lease: string, value: string, ttlMs: number): Promise<Reply>;
  release(lease: string, channel: string, value: string): Promise<number>;
  /** Raises the token counter to at least `floor` (after Redis lost data). */
  raiseCounter(counter: string, floor: string): Promise<string>;
}

export function leaseScripts(redis: ScriptHost): LeaseScripts {
  return defineScripts(redis, {
    acquire: luaScripts.acquire,
    renew: luaScripts.renew,
    release: luaScripts.release,
    raiseCounter: sharedLuaScripts['raise-to'],
  }) as unknown as LeaseScripts;
}
