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
