/**
 * The probe a replica of a simulated app runs: a timer that notes how late it fires, so that the
 * checker can tell a starved machine from a slow scheduler (see checker/starvation.ts). It imports
 * nothing, so a replica that loads it loads nothing else of the toolkit.
 */

/** How often the probe's timer is meant to fire, ms. */
export const PROBE_EVERY_MS = 20;
/** The least lateness a probe reports, ms: less is scheduling noise. */
export const REPORT_STARVED_FROM_MS = 50;
/**
 * Starts the probe in a replica: every stretch in which this process's event loop ran at least
 * {@link REPORT_STARVED_FROM_MS} late is reported as `{ kind: 'starved', ms }` (one JSON line, as the
 * simulation reads a replica's reports). The timer does not keep the process alive. Returns its stop.
 *
 * @example
 * ```ts
 * startStarvationProbe((record) => process.stdout.write(`${JSON.stringify(record)}\n`));
 * ```
 */
export function startStarvationProbe(report: (record: { kind: 'starved'; ms: number }) => void): () => void {
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    const late = now - last - PROBE_EVERY_MS;
    last = now;
    if (late >= REPORT_STARVED_FROM_MS) report({ kind: 'starved', ms: Math.round(late) });
  }, PROBE_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
