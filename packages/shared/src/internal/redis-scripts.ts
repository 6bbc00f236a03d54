/**
 * One way to put Lua scripts on a Redis client, for every fenced package: ioredis `defineCommand`
 * (sent by SHA, reloaded on NOSCRIPT after a `SCRIPT FLUSH` or a failover to a fresh server), under
 * a versioned name (`acquire_fenced1`), so two versions of the SDK can share one Redis without
 * calling each other's scripts (BullMQ does the same). Once per client and name.
 */

/** A script as the generator emits it (`<name>-<numberOfKeys>.lua`; no count: the caller passes it first). */
export interface LuaScript {
  readonly name: string;
  readonly numberOfKeys?: number;
  readonly lua: string;
}

/** The part of an ioredis client (Redis or Cluster) this needs. */
export interface ScriptHost {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void;
}

/** Bump when a script's contract changes. */
export const SCRIPT_VERSION = 'fenced1';

export type ScriptCall = (...args: Array<string | number>) => Promise<unknown>;

const defined = new WeakMap<object, Set<string>>();

/** Defines `scripts` on `redis` (once per client) and returns a caller per script. */
export function defineScripts<const S extends Record<string, LuaScript>>(redis: ScriptHost, scripts: S): { readonly [K in keyof S]: ScriptCall } {
  let names = defined.get(redis);
  if (names === undefined) defined.set(redis, (names = new Set()));
  const calls: Record<string, ScriptCall> = {};
  for (const [key, script] of Object.entries(scripts)) {
    const command = `${script.name}_${SCRIPT_VERSION}`;
    if (!names.has(command)) {
      redis.defineCommand(command, script.numberOfKeys === undefined ? { lua: script.lua } : { lua: script.lua, numberOfKeys: script.numberOfKeys });
      names.add(command);
    }
    calls[key] = (...args) => (redis as unknown as Record<string, ScriptCall>)[command]!(...args);
  }
  return calls as { readonly [K in keyof S]: ScriptCall };
}
