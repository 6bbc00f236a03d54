import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** A Node process of ours, with its JSON stdout lines collected. */
export interface ChildHandle {
  readonly process: ChildProcess;
  readonly lines: Array<Record<string, unknown>>;
  /** Resolves with the first line (from now or earlier, after `from`) matching `predicate`. */
  waitForLine(predicate: (line: Record<string, unknown>) => boolean, timeoutMs?: number, from?: number): Promise<Record<string, unknown>>;
  kill(signal?: NodeJS.Signals): void;
}

/** A TypeScript file of this repository run as its own Node process on source. */
export function spawnTs(file: string, env: Record<string, string>, extraEnv: NodeJS.ProcessEnv = {}): ChildHandle {
  return spawnNode(['--import', 'tsx', '--conditions=@fenced/source', file], { cwd: root, env: { ...process.env, ...extraEnv, ...env } });
}

/** `node <args>` in `cwd` with exactly `env` (a compiled app of an installed project, say). */
export function spawnNode(args: readonly string[], options: { cwd: string; env: NodeJS.ProcessEnv }): ChildHandle {
  const file = args.at(-1);
  const child = spawn(process.execPath, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: Array<Record<string, unknown>> = [];
  createInterface({ input: child.stdout! }).on('line', (text) => {
    try {
      lines.push(JSON.parse(text) as Record<string, unknown>);
    } catch {
      lines.push({ kind: 'text', text });
    }
  });
  child.stderr!.resume();
  return {
    process: child,
    lines,
    async waitForLine(predicate, timeoutMs = 10_000, from = 0) {
      const deadline = performance.now() + timeoutMs;
      for (;;) {
        const found = lines.slice(from).find(predicate);
        if (found !== undefined) return found;
        if (performance.now() > deadline) throw new Error(`no matching line from ${file} within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    kill(signal = 'SIGKILL') {
      if (child.exitCode === null) child.kill(signal);
    },
  };
}

/** Whether the process is stopped (SIGSTOP): its state in /proc is `T`. */
export function isStopped(pid: number): boolean {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'T';
}

/** `tsx <script> <args>` of this repository to its end (a simulation script, say), with DATABASE_URL set. */
export function runScript(script: string, args: readonly string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', script, ...args], { cwd: root, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
