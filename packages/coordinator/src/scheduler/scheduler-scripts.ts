import { defineScripts, type ScriptHost } from '@fenced/shared/internal';
import { luaScripts } from './lua/generated-lua.js';

/** The scheduler's scripts on one client, typed (the Lua files beside this say what each returns). */
export interface SchedulerScripts {
  /** Records a dispatched fire if the lease value still matches: 1 recorded, 0 not our lease. */
  recordFire(lease: string, fires: string, leaseValue: string, job: string, scheduledAtMs: string): Promise<number>;
}

export function schedulerScripts(redis: ScriptHost): SchedulerScripts {
  return defineScripts(redis, { recordFire: luaScripts['record-fire'] }) as unknown as SchedulerScripts;
}
