// The status of one lease, whatever store it lives in (each store's reader: read-redis-leases.ts, read-postgres-leases.ts, read-etcd-leases.ts; lease-stores.ts picks one).

/** One election, from the lease's stream. */
export interface ElectionRecord {
  readonly at: string;
  readonly token: string;
  readonly node: string;
  readonly ttlMs: number;
  /** How many fences the elected coordinator advanced (0: no fence at all). */
  readonly fences: number;
  /** The election found Redis behind a fence and raised the counter past it. */
  readonly regressed: boolean;
}

export interface JobStatus {
  readonly job: string;
  /** Due time of the last fire recorded as dispatched. */
  readonly lastFire: string;
  /** When it was dispatched (server clock), when recorded by this version of fenced. */
  readonly dispatchedAt: string | null;
  readonly latenessMs: number | null;
}

export interface LeaseStatus {
  readonly lease: string;
  readonly leader: { readonly node: string; readonly token: string } | null;
  /** Time left on the lease in Redis (its PTTL), or null with no leader. */
  readonly timeLeftMs: number | null;
  /** The token counter: the last token minted. */
  readonly counter: string | null;
  readonly jobs: readonly JobStatus[];
  /** The last failover gap a new term measured (previous term's last dispatch to its first). */
  readonly failoverGapMs: number | null;
  /** The last elections, newest first. */
  readonly elections: readonly ElectionRecord[];
}

/**
 * The jobs of a scheduler's record of fires (the same fields in Redis's hash and PostgreSQL's table:
 * a job's last fire, `:dispatched:<job>`, and the record's own marks, which start with a colon).
 */
export function jobsOfRecord(fields: Readonly<Record<string, string>>): JobStatus[] {
  const iso = (ms: number) => new Date(ms).toISOString();
  const jobs: JobStatus[] = [];
  for (const [field, at] of Object.entries(fields)) {
    if (field.startsWith(':')) continue; // the record's own marks: never a job name
    const scheduled = Number(at);
    const dispatched = fields[`:dispatched:${field}`] === undefined ? null : Number(fields[`:dispatched:${field}`]);
    jobs.push({ job: field, lastFire: iso(scheduled), dispatchedAt: dispatched === null ? null : iso(dispatched), latenessMs: dispatched === null ? null : Math.max(0, dispatched - scheduled) });
  }
  return jobs.sort((a, b) => a.job.localeCompare(b.job));
}
