/**
 * The deterministic id of one fire: job plus scheduled time, in basic ISO-8601 (no colons, which
 * BullMQ refuses in custom job ids). Two leaders dispatching the same fire produce the same id, so
 * the guard's dedupe table and BullMQ's job ids drop the second copy.
 *
 * @example fireId('invoices', Date.UTC(2026, 10, 29, 10)) // 'invoices@20261129T100000.000Z'
 */
export function fireId(job: string, scheduledAtMs: number): string {
  const iso = new Date(scheduledAtMs).toISOString(); // 2026-11-29T10:00:00.000Z
  return `${job}@${iso.replaceAll('-', '').replaceAll(':', '')}`;
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
