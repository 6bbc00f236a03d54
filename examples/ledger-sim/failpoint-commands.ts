/**
 * The simulation's way into a replica's failpoints: it writes `{"kind":"arm","failpoint":…,"action":…}`
 * (action `stop`, `kill`, or `stall` with `"ms"`) or `{"kind":"disarm","failpoint":…}` lines to the
 * replica's stdin, and the replica reports every hit as `{"kind":"failpoint","name":…,"action":…}` on
 * stdout, before the action runs (a stopped process cannot report after). `{"kind":"stall","ms":…}`
 * blocks the event loop at once, wherever the replica is. Failpoints are armed here, by the
 * simulation's replica, and nowhere else. A replica adds commands of its own with `commands` (by
 * their `kind`), such as the ledger replica's `hold-pool`.
 */
import { createInterface } from 'node:readline';
import { failpoints, stall, type FailpointAction, type FailpointName } from '@fenced/shared/failpoints';

function actionOf(command: { action?: unknown; ms?: unknown }): FailpointAction {
  switch (command.action) {
    case 'stop':
      return { kind: 'stop' };
    case 'kill':
      return { kind: 'kill' };
    case 'stall':
      return { kind: 'stall', ms: Number(command.ms) };
    default:
      throw new TypeError(`the action is stop, kill or stall, not ${JSON.stringify(command.action)}`);
  }
}

/**
 * `moments`: where this service's code stands at a moment the simulation names by another failpoint
 * (the HTTP service's callers have no handler pre-check: their moment between the check and the
 * write is `http.headers-sent-before-body`). An arm command for a key arms its value, and its hits
 * are reported under the key, the name the simulation waits for.
 */
export function listenForFailpointCommands(
  report: (record: Record<string, unknown>) => void,
  moments: Partial<Record<FailpointName, FailpointName>> = {},
  commands: Record<string, (command: Record<string, unknown>) => void> = {},
): void {
  const askedAs = new Map(Object.entries(moments).map(([asked, armed]) => [armed, asked as FailpointName]));
  failpoints.onHit((hit) => report({ kind: 'failpoint', name: askedAs.get(hit.name) ?? hit.name, action: hit.action }));
  createInterface({ input: process.stdin }).on('line', (text) => {
    let command: { kind?: unknown; failpoint?: unknown; action?: unknown; ms?: unknown };
    try {
      command = JSON.parse(text) as typeof command;
    } catch {
      return report({ kind: 'text', text: `not a command: ${text}` });
    }
    try {
      if (command.kind === 'arm') {
        failpoints.arm(moments[command.failpoint as FailpointName] ?? (command.failpoint as FailpointName), actionOf(command));
      } else if (command.kind === 'disarm') {
        failpoints.disarm(moments[command.failpoint as FailpointName] ?? (command.failpoint as FailpointName));
      } else if (command.kind === 'stall') {
        const ms = Number(command.ms);
        if (!(Number.isFinite(ms) && ms >= 0)) throw new TypeError(`a stall is a number of ms >= 0, not ${JSON.stringify(command.ms)}`);
        report({ kind: 'stalling', ms });
        stall(ms);
      } else if (typeof command.kind === 'string' && Object.hasOwn(commands, command.kind)) {
        commands[command.kind]!(command);
      }
    } catch (err) {
      report({ kind: 'text', text: `bad command ${text}: ${(err as Error).message}` });
    }
  });
}
