import { defineScripts, type ScriptHost } from '@fenced/shared/internal';
import { luaScripts } from './lua/generated-lua.js';
import type { FireRecord } from '../fire-log.js';


/** The scheduler's scripts on one client, typed (the Lua files beside this say what each returns). */
export interface SchedulerScripts {
  /**
   * Records fires of several jobs in one call, if the lease value still matches: 1 recorded, 0 not
   * our lease (nothing changed). `failoverGapMs` is the gap the batch's first dispatch of a term closed.
   */
  recordFires(lease: string, fires: string, leaseValue: string, records: readonly FireRecord[], failoverGapMs?: number | null): Promise<number>;
}

export function schedulerScripts(redis: ScriptHost): SchedulerScripts {
  const { recordFires } = defineScripts(redis, { recordFires: luaScripts['record-fires'] });
  return {
    recordFires: async (lease, fires, leaseValue, records, failoverGapMs) => {
      const args: string[] = [lease, fires, leaseValue, failoverGapMs == null ? '' : String(Math.round(failoverGapMs))];
      for (const r of records) args.push(r.job, String(Math.floor(r.scheduledAt)), r.dispatchedAt == null ? '' : String(Math.floor(r.dispatchedAt)));
      return Number(await recordFires(...args));
    },
  };
}
