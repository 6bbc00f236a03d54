// `@fenced/shared/internal`: plumbing the fenced packages share, not part of the public API (it may
// change in any release). Nothing here is listed in the README.
export { defineScripts, SCRIPT_VERSION, type LuaScript, type ScriptCall, type ScriptHost } from './redis-scripts.js';
export { luaScripts as sharedLuaScripts } from '../lua/generated-lua.js';
