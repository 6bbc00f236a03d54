/**
 * The simulation's way into a replica's failpoints: it writes `{"kind":"arm","failpoint":…,"action":"stop"}`
 * or `{"kind":"disarm","failpoint":…}` lines to the replica's stdin, and the replica reports every hit
 * as `{"kind":"failpoint","name":…}` on stdout, before the action runs (a stopped process cannot report
 * after). Failpoints are armed here, by the simulation's replica, and nowhere else.
 */
import { createInterface } from 'node:readline';
import { failpoints, type FailpointAction, type FailpointName } from '@fenced/shared/failpoints';

const ACTIONS: Record<string, FailpointAction> = { stop: { kind: 'stop' }, kill: { kind: 'kill' } };

export function listenForFailpointCommands(report: (record: Record<string, unknown>) => void): void {
  failpoints.onHit((hit) => report({ kind: 'failpoint', name: hit.name }));
  createInterface({ input: process.stdin }).on('line', (text) => {
    let command: { kind?: unknown; failpoint?: unknown; action?: unknown };
    try {
      command = JSON.parse(text) as typeof command;
    } catch {
      return report({ kind: 'text', text: `not a command: ${text}` });
    }
    try {
      if (command.kind === 'arm') {
        const action = ACTIONS[String(command.action)];
        if (action === undefined) throw new TypeError(`the action is stop or kill, not ${JSON.stringify(command.action)}`);
        failpoints.arm(command.failpoint as FailpointName, action);
      } else if (command.kind === 'disarm') {
        failpoints.disarm(command.failpoint as FailpointName);
      }
    } catch (err) {
      report({ kind: 'text', text: `bad command ${text}: ${(err as Error).message}` });
    }
  });
}
