import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = fileURLToPath(new URL('../../packages/cli/src/bin.ts', import.meta.url));

export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout parsed as JSON (for `--json` runs). */
  json<T = Record<string, unknown>>(): T;
}

/** `fenced` with `args` as its own OS process, on source, with `env` over this process's. */
function spawnCli(args: readonly string[], env: Record<string, string | undefined>) {
  return spawn(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', bin, ...args], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Runs the `fenced` command line as its own OS process, on source, and collects what it printed. */
export async function runCli(args: readonly string[], env: Record<string, string | undefined> = {}, timeoutMs = 60_000): Promise<CliRun> {
  const child = spawnCli(args, env);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
  clearTimeout(timer);
  return {
    code,
    stdout,
    stderr,
    json<T>() {
      try {
        return JSON.parse(stdout) as T;
      } catch {
        throw new Error(`fenced ${args.join(' ')} printed no JSON (exit ${code}):\n${stdout}\n${stderr}`);
      }
    },
  };
}

/** `fenced … --serve`, running until stopped: its URL once it serves. */
export async function serveCli(args: readonly string[], env: Record<string, string | undefined> = {}): Promise<{ url: string; stop(): Promise<number | null>; output(): string }> {
  const child = spawnCli(args, env);
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const closed = new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`fenced ${args.join(' ')} did not start serving:\n${out}`)), 60_000);
    child.stdout.on('data', (chunk: string) => {
      out += chunk;
      const match = /"serving":\s*"([^"]+)"/.exec(out) ?? /at (http:\S+)/.exec(out);
      if (match !== null) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    void closed.then((code) => reject(new Error(`fenced exited (${code}) before serving:\n${out}`)));
  });
  return {
    url,
    output: () => out,
    async stop() {
      child.kill('SIGTERM');
      return closed;
    },
  };
}
