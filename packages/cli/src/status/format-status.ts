import { humanMs, textTable } from '../text-table.js';
import { leaseStoreRow } from '../lease-stores.js';
import type { Status } from './read-status.js';

/** `fenced status` for the terminal: leases, their jobs and elections, then resources. */
export function formatStatus(status: Status): string {
  const now = Date.parse(status.at);
  const ago = (at: string | null) => (at === null ? '-' : `${humanMs(now - Date.parse(at))} ago`);
  const store = leaseStoreRow(status.leaseStore);
  const out: string[] = [`fenced status at ${status.at} (${store.heading(status.keyPrefix)})`, ''];

  if (status.leases.length === 0) out.push(`leases: ${store.noLeasesYet} (no coordinator has been elected here)`);
  else {
    out.push('leases:');
    out.push(
      textTable(
        ['lease', 'leader', 'token', 'time left', 'counter', 'last election', 'failover gap'],
        status.leases.map((l) => [
          l.lease,
          l.leader?.node ?? '(none)',
          l.leader?.token ?? '-',
          humanMs(l.timeLeftMs),
          l.counter ?? '-',
          l.elections[0] === undefined ? '-' : ago(l.elections[0].at),
          humanMs(l.failoverGapMs),
        ]),
      ),
    );
    const jobs = status.leases.flatMap((l) => l.jobs.map((j) => [l.lease, j.job, j.lastFire, ago(j.lastFire), humanMs(j.latenessMs)]));
    if (jobs.length > 0) {
      out.push('', 'jobs (last fire dispatched):');
      out.push(textTable(['lease', 'job', 'last fire due', 'due', 'lateness'], jobs));
    }
    const elections = status.leases.flatMap((l) =>
      l.elections.map((e) => [l.lease, e.at, e.node, e.token, `${e.ttlMs} ms`, String(e.fences), e.regressed ? 'yes' : ''],
    ));
    if (elections.length > 0) {
      out.push('', 'elections (newest first):');
      out.push(textTable(['lease', 'at', 'node', 'token', 'ttl', 'fences', 'counter repaired'], elections));
    }
  }

  out.push('');
  if (status.resources.length === 0) out.push(status.database ? 'resources: no fence in the database yet' : 'resources: none seen in Redis (give --database to read the fences)');
  else {
    out.push(status.database ? 'resources:' : 'resources (Redis only: give --database to read the fences):');
    out.push(
      textTable(
        ['resource', 'fence', 'redis mark', 'last applied fire', 'applied', 'applied fires', 'oldest record', 'refused (shown)'],
        status.resources.map((r) => [
          r.resource,
          r.fence ?? '-',
          r.mark ?? '-',
          r.lastAppliedFire === null ? '-' : `${r.lastAppliedFire.fireId} (token ${r.lastAppliedFire.token})`,
          r.lastAppliedFire === null ? '-' : ago(r.lastAppliedFire.appliedAt),
          r.appliedFires === null ? '-' : String(r.appliedFires),
          ago(r.oldestAppliedAt),
          String(r.refusals.length),
        ]),
      ),
    );
    const refusals = status.resources.flatMap((r) => r.refusals.map((x) => [r.resource, x.at, x.token, x.highest, x.via, x.fireId ?? '-']));
    if (refusals.length > 0) {
      out.push('', 'refused writes (newest first):');
      out.push(textTable(['resource', 'at', 'token', 'fence', 'via', 'fire'], refusals));
    }
  }
  return out.join('\n');
}
