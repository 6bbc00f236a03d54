import type { Etcd3 } from 'etcd3';
import { parseOptions } from '@fenced/shared/internal';
import { etcdFireLog } from './etcd-fire-log.js';
import { etcdMembership } from './etcd-membership.js';
import type { LeaseBackend, ReleaseHub } from '../lease-backend.js';
import { releaseHubOver } from '../release-hub.js';
import { EtcdClock, type EtcdTimeSource } from './etcd-clock.js';
import { etcdKeys, type EtcdKeys } from './etcd-keys.js';
import { etcdLeaseStore } from './etcd-lease-store.js';
import { etcdLeasesOptionsSchema, type EtcdLeasesOptionsInput } from './etcd-leases-options.js';
import { EtcdReleaseWatch } from './etcd-release-watch.js';
import { EtcdSessions } from './etcd-sessions.js';
import { EtcdHolderReads } from './etcd-holder-reads.js';
import { etcdClusterProblem } from './etcd-cluster-info.js';

/** Leases in etcd: a `LeaseBackend`. */
export interface EtcdLeases extends LeaseBackend {
  readonly kind: 'etcd';
  readonly keys: EtcdKeys;
  /** Revokes this process's etcd leases (its keys go at once). Call after its coordinators stopped. */
  close(): Promise<void>;
}

export type EtcdLeasesOptions = Omit<EtcdLeasesOptionsInput, 'client' | 'clock'> & {
  /** An `Etcd3` client (npm `etcd3` 1.1): the endpoints, TLS and credentials are its own. */
  client: Etcd3;
  clock?: EtcdTimeSource;
};

/** A generous bound for requests that are not a lease's own (their callers pass the lease's). */
const ADMIN_TIMEOUT_MS = 10_000;

/**
 * Leases in etcd: tokens from a consensus system. A lease is a key created only if absent, attached
 * to the process's etcd lease; its token is the revision etcd assigned the creation (plus a base that
 * only a counter repair raises), so it can never go back, not through a failover and not through a
 * restart. Standbys hear releases on one watch; a lease group's names share one etcd lease per
 * process, so a thousand names cost one keep-alive per renew round.
 *
 * @throws {ConfigError} for bad options (names the option).
 * @example
 * ```ts
 * const client = new Etcd3({ hosts: ['http://etcd-0:2379', 'http://etcd-1:2379', 'http://etcd-2:2379'] });
 * const leases = etcdLeases({ client, clock: postgresClock(pool) });
 * const coordinator = createCoordinator({ store: leases, lease: 'billing', fences: [guard] });
 * ```
 */
export function etcdLeases(input: EtcdLeasesOptions): EtcdLeases {
  const options = parseOptions('etcd leases', etcdLeasesOptionsSchema, input);
  const client = input.client;
  const keys = etcdKeys(options.prefix);
  const sessions = new EtcdSessions(client);
  const context = { client, keys, sessions, holders: new EtcdHolderReads(client), clock: new EtcdClock(input.clock ?? 'local'), releases: new EtcdReleaseWatch(client, keys) };

  return Object.freeze({
    kind: 'etcd' as const,
    // Renews on a shared grid arrive in one turn of the event loop and share one keep-alive.
    batchesRenewals: true,
    keys,
    openLease: (lease: string, nodeId: string) => etcdLeaseStore(context, lease, nodeId),
    fireLog: (lease: string) => etcdFireLog(client, keys, lease, ADMIN_TIMEOUT_MS),
    membership: (group: string) => etcdMembership(client, keys, sessions, group),
    openReleaseHub: async (timeoutMs: number, onError: (error: unknown) => void): Promise<ReleaseHub> => releaseHubOver((lease, handlers, ms) => context.releases.subscribe(lease, handlers, ms), timeoutMs, onError),
    configProblem: (timeoutMs: number) => etcdClusterProblem(client, timeoutMs),
    async close() {
      context.releases.close();
      await sessions.revokeAll(ADMIN_TIMEOUT_MS);
    },
  });
}
