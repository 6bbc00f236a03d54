import type { Etcd3 } from 'etcd3';
import { etcdUnavailable } from './etcd-errors.js';
import { parseHolder } from './etcd-holder.js';
import { etcdKeys, prefixEnd } from './etcd-keys.js';
import { withinBudget } from './etcd-budget.js';

/** One lease of an etcd lease store as operators read it (`fenced status --lease-store etcd`). */
export interface EtcdLeaseInspection {
  readonly lease: string;
  readonly holder: { readonly nodeId: string; readonly token: string } | null;
  /** What the holder's etcd lease has left (whole seconds, as etcd counts), or null with no holder. */
  readonly timeLeftMs: number | null;
  /** The lease's token base (raised only by a counter repair). */
  readonly base: string;
  /** The scheduler's record: job → last fire (epoch ms), and its marks (fields starting with a colon). */
  readonly fires: Readonly<Record<string, string>>;
  /** The last elections, newest first. */
  readonly elections: ReadonlyArray<{ readonly token: string; readonly nodeId: string; readonly ttlMs: number; readonly fences: number; readonly regressed: boolean; readonly at: number }>;
}

/**
 * Reads every lease under `prefix` (or only `only`) at one revision of the cluster: holders, time
 * left, base, the scheduler's record and the last `history` elections.
 */
export async function inspectEtcdLeases(client: Etcd3, options: { readonly prefix?: string; readonly only?: readonly string[]; readonly history: number; readonly timeoutMs?: number }): Promise<EtcdLeaseInspection[]> {
  const keys = etcdKeys(options.prefix ?? 'fenced/');
  const timeoutMs = options.timeoutMs ?? 5000;
  try {
    const leases = await withinBudget('range', timeoutMs, (o) => client.kv.range({ key: keys.leases.start, range_end: keys.leases.end }, o));
    // Everything else at the revision the lease keys were read at: one consistent picture.
    const revision = leases.header.revision;
    const named = new Map(leases.kvs.map((kv) => [keys.leaseName(kv.key), kv]));
    const under = (folder: string) => {
      const start = Buffer.from(`${keys.prefix}${folder}/`);
      return withinBudget('range', timeoutMs, (o) => client.kv.range({ key: start, range_end: prefixEnd(start), revision }, o));
    };
    const [fires, elections, bases] = await Promise.all([under('fires'), under('elections'), under('base')]);
    const names = new Set<string>([...named.keys()]);
    const after = (kv: { key: Buffer }, prefix: string) => kv.key.toString().slice(prefix.length);
    for (const kv of fires.kvs) names.add(after(kv, `${keys.prefix}fires/`).split('/')[0]!);
    for (const kv of elections.kvs) names.add(after(kv, `${keys.prefix}elections/`).split('/')[0]!);
    const chosen = [...names].filter((n) => options.only === undefined || options.only.includes(n)).sort();
    return await Promise.all(
      chosen.map(async (lease): Promise<EtcdLeaseInspection> => {
        const holder = parseHolder(named.get(lease));
        const ttl = holder === null ? null : await withinBudget('leaseTimeToLive', timeoutMs, (o) => client.leaseClient.leaseTimeToLive({ ID: holder.etcdLease, keys: false }, o)).catch(() => null);
        const ownFires = fires.kvs.filter((kv) => after(kv, `${keys.prefix}fires/`).startsWith(`${lease}/`));
        const ownElections = elections.kvs.filter((kv) => after(kv, `${keys.prefix}elections/`).startsWith(`${lease}/`)).reverse();
        const base = bases.kvs.find((kv) => after(kv, `${keys.prefix}base/`) === lease);
        return {
          lease,
          holder: holder === null ? null : { nodeId: holder.nodeId, token: holder.token.toString() },
          timeLeftMs: ttl === null ? null : Math.max(Number(ttl.TTL), 0) * 1000,
          base: base === undefined ? '0' : base.value.toString(),
          fires: Object.fromEntries(
            ownFires.map((kv) => {
              const field = after(kv, `${keys.prefix}fires/${lease}/`);
              const value = kv.value.toString();
              return [field, field.startsWith(':') ? value : BigInt(value).toString()];
            }),
          ),
          elections: ownElections.slice(0, options.history).map((kv) => {
            const e = JSON.parse(kv.value.toString()) as { token: string; nodeId: string; ttlMs: number; fences: number; regressed: boolean; at: number };
            return { token: e.token, nodeId: e.nodeId, ttlMs: e.ttlMs, fences: e.fences, regressed: e.regressed, at: e.at };
          }),
        };
      }),
    );
  } catch (error) {
    throw etcdUnavailable('inspect leases', error);
  }
}

