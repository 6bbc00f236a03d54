import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A process as /proc shows it. */
export interface Proc {
  pid: number;
  ppid: number;
  /** The state letter: T = stopped (SIGSTOP), Z = dead, waiting to be reaped. */
  state: string;
  command: string;
}

/** The process `pid` as /proc shows it now; undefined once it is gone. */
export function readProc(pid: number): Proc | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const command = readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ').trim().slice(0, 120);
    return { pid, ppid: Number(rest[1]), state: rest[0]!, command };
  } catch {
    return undefined; // gone while we looked
  }
}

/** Every live process below `root` in the process tree (redis-server rewrites its environment, so go by ancestry). */
export function descendants(root: number): Proc[] {
  const all = readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map((e) => readProc(Number(e)))
    .filter((p): p is Proc => p !== undefined);
  const below = new Set([root]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of all) if (below.has(p.ppid) && !below.has(p.pid)) (below.add(p.pid), (grew = true));
  }
  return all.filter((p) => p.pid !== root && below.has(p.pid) && p.state !== 'Z');
}

/**
 * A folder holding every tool of the PATH but Redis's, to stand in for a machine without Redis (its
 * `bin`; remove the folder above it when done).
 */
export function pathWithoutRedis(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fenced-no-redis-'));
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  for (const from of (process.env['PATH'] ?? '').split(':')) {
    if (from === '' || !existsSync(from)) continue;
    for (const tool of readdirSync(from)) {
      if (tool.startsWith('redis-') || existsSync(join(bin, tool))) continue;
      symlinkSync(join(from, tool), join(bin, tool));
    }
  }
  return bin;
}
