import { readFileSync } from 'node:fs';

/** CPU seconds a process has used so far (utime + stime from /proc, 100 clock ticks a second); 0 once it is gone. */
export function cpuSecondsOf(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}
