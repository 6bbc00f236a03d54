import type { ChildProcess } from 'node:child_process';

/**
 * Every OS process the toolkit starts (replicas, redis-servers) while it is alive, so that an
 * interrupted run can end them all at once. A replica may be frozen with SIGSTOP at that moment: it
 * would never act on a SIGTERM, and Ctrl-C's SIGINT to the process group waits in it until a SIGCONT
 * that nobody sends. So each one gets SIGCONT, then SIGKILL.
 */
const live = new Set<ChildProcess>();
/** Set once the processes were killed for an interrupt: a run still unwinding may not start new ones. */
let interrupted = false;

/** Keeps `child` in the registry until it exits (or kills it at once, after an interrupt). */
export function trackChild(child: ChildProcess): void {
  if (interrupted) {
    child.kill('SIGKILL');
    return;
  }
  live.add(child);
  const forget = () => live.delete(child);
  child.once('exit', forget);
  child.once('error', forget);
}

/** Continues and kills every tracked process now, synchronously (safe inside a signal handler). */
export function killTrackedChildren(): number {
  interrupted = true;
  let killed = 0;
  for (const child of live) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    try {
      child.kill('SIGCONT');
      child.kill('SIGKILL');
      killed++;
    } catch {
      // Already gone.
    }
  }
  live.clear();
  return killed;
}

/** Clean-ups to run when a run is interrupted (the app's schema, say), until they are untracked. */
const cleanups = new Set<() => Promise<unknown>>();

/** Tracks `cleanup` for an interrupt; call the returned function once it ran the normal way. */
export function trackCleanup(cleanup: () => Promise<unknown>): () => void {
  cleanups.add(cleanup);
  return () => cleanups.delete(cleanup);
}

/** Runs the tracked clean-ups (after the processes were killed), each failure ignored, within `timeoutMs`. */
export async function runTrackedCleanups(timeoutMs: number): Promise<void> {
  const all = Promise.allSettled([...cleanups].map((cleanup) => cleanup()));
  cleanups.clear();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([all, new Promise((r) => (timer = setTimeout(r, timeoutMs)))]);
  clearTimeout(timer);
}
