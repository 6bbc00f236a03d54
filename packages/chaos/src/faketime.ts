import { existsSync } from 'node:fs';

/** Where Debian's `faketime` package puts the preload library. */
const LIBFAKETIME_PATHS = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1',
  '/usr/lib/faketime/libfaketime.so.1',
  '/usr/local/lib/faketime/libfaketime.so.1',
];

/** The libfaketime library on this machine, or undefined. */
export function findLibfaketime(): string | undefined {
  return LIBFAKETIME_PATHS.find((p) => existsSync(p));
}

/**
 * A clock fault for a real process, through libfaketime:
 * - `offset`: the wall clock runs `offsetMs` ahead (negative: behind) from the start;
 * - `rate`: every clock of the process (monotonic too) runs at `rate` times real speed, so its
 *   timers fire late and its own lease deadline stretches past the real lease;
 * - `stepped`: the wall clock is what a timestamp file says (`clockStepText`), re-read on every
 *   reading, so rewriting the file steps the clock mid-run; the monotonic clock is left alone.
 */
export type ClockFault = { kind: 'offset'; offsetMs: number } | { kind: 'rate'; rate: number } | { kind: 'stepped' };

/** What a libfaketime timestamp file holds to set the wall clock `offsetMs` off real time. */
export function clockStepText(offsetMs: number): string {
  return `${offsetMs >= 0 ? '+' : ''}${offsetMs / 1000}s\n`;
}

/**
 * Environment variables that apply `fault` to a process started with them.
 *
 * @throws when libfaketime is not installed (`apt-get install faketime`), or a stepped fault has no file.
 */
export function faketimeEnv(fault: ClockFault, timestampFile?: string): Record<string, string> {
  const library = findLibfaketime();
  if (library === undefined) throw new Error('clock faults need libfaketime: apt-get install faketime');
  const env: Record<string, string> = { LD_PRELOAD: library, FAKETIME_NO_CACHE: '1' };
  if (fault.kind === 'stepped') {
    if (timestampFile === undefined) throw new Error('a stepped clock fault needs its timestamp file');
    env['FAKETIME_TIMESTAMP_FILE'] = timestampFile;
    env['DONT_FAKE_MONOTONIC'] = '1';
  } else if (fault.kind === 'offset') {
    const seconds = fault.offsetMs / 1000;
    env['FAKETIME'] = `${seconds >= 0 ? '+' : ''}${seconds}s`;
    // An offset is a wall-clock fault: leave the monotonic clock alone.
    env['DONT_FAKE_MONOTONIC'] = '1';
  } else {
    if (!(fault.rate > 0)) throw new RangeError('clock rate must be positive');
    env['FAKETIME'] = `+0 x${fault.rate}`;
  }
  return env;
}
