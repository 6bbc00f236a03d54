import { defineScripts, type ScriptHost } from '@fenced/shared/internal';
import { luaScripts } from './lua/generated-lua.js';

/** The scheduler's scripts on one client, typed (the Lua files beside this say what each returns). */
export interface SchedulerScripts {
  /**
   * Records a dispatched fire (with when it was dispatched) or, without `dispatchedAtMs`, a job's
   * baseline, if the lease value still matches: 1 recorded, 0 not our lease.
   */
  recordFire(lease: string, fires: string, leaseValue: string, job: string, scheduledAtMs: string, dispatchedAtMs?: string, failoverGapMs?: string): Promise<number>;
}

export function schedulerScripts(redis: ScriptHost): SchedulerScripts {
  return defineScripts(redis, { recordFire: luaScripts['record-fire'] }) as unknown as SchedulerScripts;
}
