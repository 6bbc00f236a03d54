import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { trackChild } from './child-registry.js';

/** One JSON line a process wrote, stamped with when the supervisor read it (ms since `epoch`). */
export interface ProcessLine {
  readonly at: number;
  readonly record: Record<string, unknown>;
}

export interface ProcessSpec {
  readonly command: string;
  readonly args: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

/**
 * A real OS process under supervision: started, paused (SIGSTOP), resumed (SIGCONT), killed
 * (SIGKILL) and restarted like a replica in production would be. Its stdout is read as JSON lines.
 */
export interface ManagedProcess {
  readonly name: string;
  readonly pid: number | undefined;
  readonly running: boolean;
  readonly paused: boolean;
  /**
   * How the last incarnation ended: `crashed` when it exited on its own with a failure (a non-zero
   * code: an unhandled error, say), not when a signal ended it (a kill, a stop). Undefined while it runs.
   */
  readonly lastExit: { readonly code: number | null; readonly signal: NodeJS.Signals | null; readonly crashed: boolean } | undefined;
  start(extraEnv?: Readonly<Record<string, string>>): void;
  pause(): void;
  /**
   * Notes that the process is stopping itself (SIGSTOP at a failpoint it was armed with) and resolves
   * once the kernel shows it stopped, so that a `resume()` right after cannot arrive first and be lost.
   */
  pausedItself(): Promise<void>;
  resume(): void;
  /** Writes one JSON line to its stdin (a command to the replica, for example arming a failpoint). */
  send(record: Record<string, unknown>): void;
  kill(): Promise<void>;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
  /** Lines are delivered here as they arrive. */
  onLine(listener: (line: ProcessLine) => void): void;
  /** Called as each incarnation ends (a kill, a crash, a stop), once its last line was delivered, with how it ended. */
  onExit(listener: (exit: NonNullable<ManagedProcess['lastExit']>) => void): void;
  /** Standard error, kept for diagnostics (the last 64 KiB). */
  stderr(): string;
}

export function managedProcess(name: string, spec: ProcessSpec, clock: () => number): ManagedProcess {
  let child: ChildProcess | undefined;
  let paused = false;
  let errors = '';
  let lastExit: ManagedProcess['lastExit'];
  const listeners: Array<(line: ProcessLine) => void> = [];
  const exitListeners: Array<(exit: NonNullable<ManagedProcess['lastExit']>) => void> = [];

  // Each incarnation's end: its exit, and every line it printed read (stdout closed). Waiting for the
  // close, not the exit, keeps its last lines ahead of the exit in the history.
  const closed = new WeakMap<ChildProcess, Promise<void>>();
  const exited = (c: ChildProcess) => closed.get(c) ?? Promise.resolve();

  const handle: ManagedProcess = {
    name,
    get pid() {
      return child?.pid;
    },
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    get paused() {
      return paused;
    },
    get lastExit() {
      return lastExit;
    },
    start(extraEnv = {}) {
      if (handle.running) return;
      paused = false;
      lastExit = undefined;
      const c = spawn(spec.command, [...spec.args], {
        cwd: spec.cwd,
        env: { ...process.env, ...spec.env, ...extraEnv },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      child = c;
      trackChild(c);
      c.once('exit', (code, signal) => {
        if (child === c) lastExit = { code, signal, crashed: signal === null && code !== 0 };
      });
      closed.set(
        c,
        new Promise<void>((resolve) =>
          c.once('close', (code, signal) => {
            for (const l of exitListeners) l({ code, signal, crashed: signal === null && code !== 0 });
            resolve();
          }),
        ),
      );
      // A replica that exits while a command is on its way must not take the supervisor down.
      c.stdin!.on('error', () => {});
      createInterface({ input: c.stdout! }).on('line', (text) => {
        let record: Record<string, unknown>;
        try {
          record = JSON.parse(text) as Record<string, unknown>;
        } catch {
          record = { kind: 'text', text };
        }
        const line = { at: clock(), record };
        for (const l of listeners) l(line);
      });
      c.stderr!.on('data', (chunk: Buffer) => {
        errors = (errors + chunk.toString()).slice(-65_536);
      });
      c.on('error', (err) => {
        errors += `\nspawn failed: ${err.message}`;
      });
    },
    pause() {
      if (!handle.running || paused) return;
      child!.kill('SIGSTOP');
      paused = true;
    },
    async pausedItself() {
      if (!handle.running) return;
      paused = true;
      const pid = child!.pid!;
      const deadline = Date.now() + 5000;
      while (handle.running && !isStopped(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 1));
    },
    send(record) {
      if (handle.running) child!.stdin!.write(`${JSON.stringify(record)}\n`);
    },
    resume() {
      if (!handle.running || !paused) return;
      child!.kill('SIGCONT');
      paused = false;
    },
    async kill() {
      const c = child;
      if (c === undefined || !handle.running) return;
      const done = exited(c);
      c.kill('SIGKILL');
      paused = false;
      await done;
    },
    async stop(graceMs = 2000) {
      const c = child;
      if (c === undefined || !handle.running) return;
      if (paused) handle.resume();
      const done = exited(c);
      c.kill('SIGTERM');
      const timer = setTimeout(() => c.kill('SIGKILL'), graceMs);
      await done;
      clearTimeout(timer);
    },
    onLine(listener) {
      listeners.push(listener);
    },
    onExit(listener) {
      exitListeners.push(listener);
    },
    stderr: () => errors,
  };
  return handle;
}

/** Whether the kernel shows `pid` stopped (state T in /proc/<pid>/stat; Linux). */
function isStopped(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The state follows the command name, which is in parentheses and may itself hold spaces.
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'T' || state === 't';
  } catch {
    return false; // gone
  }
}
