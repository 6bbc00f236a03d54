import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunResult } from '../sim/run-scenario.js';

/**
 * A failed run, kept where a person can read it after the fact: CI keeps only the tail of the
 * output, and a run's temporary folder goes with its process. Each kept run is one folder:
 * `README.txt` (the command, the verdict, the violations), `history.jsonl` (every event, in order),
 * `check.json`, `effects.json`, each replica's `<name>.stdout.log` and `<name>.stderr.log`, the
 * whole HTML report, and the run's own Redis servers' logs (`servers/`). The newest {@link KEPT_RUNS}
 * folders stay; older ones are deleted.
 */
export const KEPT_RUNS = 10;

/** Where failed runs are kept: `FENCED_SIM_KEEP_DIR`, else `fenced-sim-failures` in the temporary folder. */
export function keptRunsRoot(env: Readonly<Record<string, string | undefined>>): string {
  return env['FENCED_SIM_KEEP_DIR'] || join(tmpdir(), 'fenced-sim-failures');
}

export interface KeptRun {
  readonly run: Pick<RunResult, 'scenario' | 'mode' | 'seed' | 'check' | 'effects' | 'history' | 'logs' | 'serverLogs'>;
  readonly verdict: string;
  readonly command: string;
  readonly reportHtml: string;
}

/** bigint and Set values as JSON can carry them. */
const jsonable = (_key: string, v: unknown): unknown => (typeof v === 'bigint' ? v.toString() : v instanceof Set ? [...v] : v);

/** A name a folder can have: letters, digits, dots and dashes. */
function safe(text: string): string {
  return text.replace(/[^A-Za-z0-9.-]+/g, '-');
}

/** Writes one failed run's folder under `root` and prunes the oldest; returns the folder's path. */
export function keepRun(root: string, kept: KeptRun, now = new Date()): string {
  const { run } = kept;
  const dir = join(root, `${now.toISOString().replace(/[:.]/g, '-')}-${safe(run.scenario)}-${run.mode}-seed${run.seed}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'README.txt'),
    [
      `command: ${kept.command}`,
      `scenario: ${run.scenario} (${run.mode}), seed ${run.seed}`,
      `verdict: ${kept.verdict}`,
      ...run.check.violations.map((v) => `violation: ${v}`),
      ...(run.check.inconclusive?.violations ?? []).map((v) => `inconclusive: ${v}`),
      'files: history.jsonl (every event, in order), check.json, effects.json, <replica>.stdout.log and <replica>.stderr.log, report.html, and the run\'s own Redis servers\' logs (servers/<redis|sentinel>-<port>.log, the last 256 KiB of each)',
      '',
    ].join('\n'),
  );
  writeFileSync(join(dir, 'history.jsonl'), `${run.history.events.map((e) => JSON.stringify(e, jsonable)).join('\n')}\n`);
  writeFileSync(join(dir, 'check.json'), JSON.stringify(run.check, jsonable, 2));
  writeFileSync(join(dir, 'effects.json'), JSON.stringify(run.effects, jsonable, 2));
  for (const [name, log] of Object.entries(run.logs)) {
    writeFileSync(join(dir, `${safe(name)}.stdout.log`), `${log.stdout.map((line) => `${new Date(line.at).toISOString()} ${JSON.stringify(line.record, jsonable)}`).join('\n')}\n`);
    writeFileSync(join(dir, `${safe(name)}.stderr.log`), log.stderr);
  }
  const servers = Object.entries(run.serverLogs);
  if (servers.length > 0) mkdirSync(join(dir, 'servers'));
  for (const [name, log] of servers) writeFileSync(join(dir, 'servers', `${safe(name)}.log`), log);
  writeFileSync(join(dir, 'report.html'), kept.reportHtml);
  pruneKeptRuns(root, KEPT_RUNS);
  return dir;
}

/** Deletes all but the newest `keep` folders of `root` (their names start with the time they were kept). */
export function pruneKeptRuns(root: string, keep: number): void {
  const folders = readdirSync(root, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
  for (const name of folders.slice(0, Math.max(0, folders.length - keep))) rmSync(join(root, name), { recursive: true, force: true });
}
