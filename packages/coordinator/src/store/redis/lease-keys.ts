/**
 * The Redis keys of one lease. They share the hash tag `{lease}`, so every script's keys
 * live in one slot and the scripts run on Redis Cluster too.
 */
export interface LeaseKeys {
  readonly lease: string;
  readonly counter: string;
  readonly released: string;
  readonly fires: string;
  /** A capped stream of this lease's last elections (token, node, TTL, fences): for operators. */
  readonly elections: string;
}

export function leaseKeys(prefix: string, lease: string): LeaseKeys {
  const base = `${prefix}:{${lease}}`;
  return {
    lease: `${base}:lease`,
    counter: `${base}:token`,
    released: `${base}:released`,
    fires: `${base}:fires`,
    elections: `${base}:elections`,
  };
}
