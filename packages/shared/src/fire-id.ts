/**
 * The deterministic id of one fire: job plus scheduled time, in basic ISO-8601 (no colons, which
 * BullMQ refuses in custom job ids). Two leaders dispatching the same fire produce the same id, so
 * the guard's dedupe table and BullMQ's job ids drop the second copy.
 *
 * @example fireId('invoices', Date.UTC(2026, 10, 29, 10)) // 'invoices@20261129T100000.000Z'
 */
export function fireId(job: string, scheduledAtMs: number): string {
  return `${job}@${instantText(scheduledAtMs).basic}`;
}

/** An instant in ISO-8601, extended (`2026-11-29T10:00:00.000Z`) and basic (`20261129T100000.000Z`). */
export interface InstantText {
  readonly ms: number;
  readonly iso: string;
  readonly basic: string;
}

let lastInstant: InstantText = { ms: Number.NaN, iso: '', basic: '' };

/**
 * The two ISO-8601 forms of an instant (epoch ms), for fire ids and envelopes. The last instant's
 * are kept: the fires of a burst (10,000 jobs due in the same second) share their scheduled time,
 * and formatting it once per fire was most of what making their envelopes cost.
 *
 * @throws {RangeError} for a time that is not a valid date (as `Date#toISOString` does).
 */
export function instantText(scheduledAtMs: number): InstantText {
  if (scheduledAtMs !== lastInstant.ms) {
    const iso = new Date(scheduledAtMs).toISOString(); // 2026-11-29T10:00:00.000Z
    lastInstant = { ms: scheduledAtMs, iso, basic: iso.replaceAll('-', '').replaceAll(':', '') };
  }
  return lastInstant;
}

/**
 * The job and scheduled time of a fire id made by {@link fireId}, or null for anything else.
 *
 * @example parseFireId('invoices@20261129T100000.000Z') // { job: 'invoices', scheduledAt: 1796205600000 }
 */
export function parseFireId(id: string): { job: string; scheduledAt: number } | null {
  const match = /^(.+)@(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})\.(\d{3})Z$/.exec(id);
  if (match === null) return null;
  const [, job, y, mo, d, h, mi, s, ms] = match;
  const scheduledAt = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), Number(ms));
  return Number.isNaN(scheduledAt) || fireId(job!, scheduledAt) !== id ? null : { job: job!, scheduledAt };
}
