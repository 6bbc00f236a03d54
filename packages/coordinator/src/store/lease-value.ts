import type { Token } from '@fenced/shared';
import { storedToken } from '@fenced/shared/internal';

/**
 * The value of a lease key in Redis: `<token>:<nodeId>`. The acquire script builds it (from the
 * counter and ARGV[1]); renew, release and the scheduler's record compare it whole, so a lease counts
 * as ours only with our node id and the token of this very term. The token comes first: it never
 * holds a colon, so the first colon splits the value whatever the node id holds.
 */
export function formatLeaseValue(token: Token, nodeId: string): string {
  return `${token}:${nodeId}`;
}

/** The token and node id of a lease value, or null for anything else. */
export function parseLeaseValue(value: string): { token: Token; nodeId: string } | null {
  const colon = value.indexOf(':');
  if (colon <= 0) return null;
  try {
    return { token: storedToken(value.slice(0, colon)), nodeId: value.slice(colon + 1) };
  } catch {
    return null;
  }
}
