import type { Token } from '@fenced/shared';
import { storedToken } from '@fenced/shared/internal';
import type { BlockingWrite, TakeoverStore } from '../takeover/advance-with-takeover.js';
import type { GuardObjectNames } from './names.js';
import type { GuardSession } from './session.js';

/**
 * The strict advance on PostgreSQL, as a store that can take over (advance-with-takeover.ts): the
 * advance runs in a transaction of its own whose lock waits are bounded by `lock_timeout`, and
 * reports its backend's pid first, so that another connection can ask `pg_blocking_pids` who holds
 * it up (the takeover function, 000003.sql).
 */
export function postgresTakeoverStore(session: GuardSession<unknown>, names: GuardObjectNames): TakeoverStore<number> {
  return {
    startAdvance(resource, token, timeoutMs) {
      let reportWaiter!: (pid: number) => void;
      let failWaiter!: (err: unknown) => void;
      const waiter = new Promise<number>((resolve, reject) => {
        reportWaiter = resolve;
        failWaiter = reject;
      });
      const done = session
        .script(async (run) => {
          // 0 disables the bound: the advance then waits as long as a lock is held (no takeover).
          const rows = await run({ text: `SELECT set_config('lock_timeout', $1, true), pg_backend_pid() AS pid`, values: [`${timeoutMs}ms`] });
          reportWaiter(Number(rows[0]?.['pid']));
          await run({ text: `SELECT ${names.advanceFn}($1::text, $2::bigint)`, values: [resource, token] });
        })
        .finally(() => failWaiter(new Error('the advance ended before its session was known')));
      return { waiter, done };
    },

    async endBlockers(waiter: number, token: Token): Promise<readonly BlockingWrite[]> {
      const rows = await session.query({
        text: `SELECT pid::text AS pid, token::text AS token, ended FROM ${names.takeoverFn}($1::integer, $2::bigint)`,
        values: [waiter, token],
      });
      return rows.map((row) => ({ session: String(row['pid']), token: storedToken(String(row['token'])), ended: row['ended'] === true }));
    },
  };
}
