import type { Etcd3, IKeyValue } from 'etcd3';
import type { Token } from '@fenced/shared';
import { storedToken } from '@fenced/shared/internal';
import { withinBudget } from './etcd-budget.js';

/**
 * A lease key as etcd holds it: who holds it, on which etcd lease, and the token of its term. The
 * token is the base stored with the key plus the key's create_revision, both fixed when the key was
 * created: a revision etcd assigned, cluster-wide and never reused, so two terms never share a token.
 */
export interface Holder {
  readonly nodeId: string;
  readonly token: Token;
  /** The etcd lease the key is attached to (decimal). */
  readonly etcdLease: string;
  readonly createRevision: string;
  /** The key's value as stored: what a write compares to be sure it is still this term's. */
  readonly raw: Buffer;
}

/** A term's token: the lease's base when its key was created, plus etcd's revision of that creation. */
export function tokenOf(base: bigint, createRevision: string): Token {
  return storedToken((base + BigInt(createRevision)).toString());
}

/** The stored value of a new lease key. */
export function holderValue(nodeId: string, base: bigint, etcdLease: string): Buffer {
  return Buffer.from(JSON.stringify({ n: nodeId, b: base.toString(), l: etcdLease }));
}

/** The holder a lease key names, or null for a key that is absent or not one of ours. */
export function parseHolder(kv: IKeyValue | undefined): Holder | null {
  if (kv === undefined) return null;
  try {
    const value = JSON.parse(kv.value.toString()) as { n?: unknown; b?: unknown; l?: unknown };
    if (typeof value.n !== 'string' || typeof value.b !== 'string' || typeof value.l !== 'string') return null;
    return { nodeId: value.n, token: tokenOf(BigInt(value.b), kv.create_revision), etcdLease: String(kv.lease), createRevision: kv.create_revision, raw: kv.value };
  } catch {
    return null;
  }
}

/** The holder of the lease key `key` now (a linearizable read), or null. */
export async function readHolder(client: Etcd3, key: Buffer, timeoutMs: number): Promise<Holder | null> {
  const reply = await withinBudget('range', timeoutMs, (o) => client.kv.range({ key }, o));
  return parseHolder(reply.kvs[0]);
}

/** Whether `holder` is the term a lease value names: the same token and node id. */
export function isTermOf(holder: Holder | null, owner: { readonly token: Token; readonly nodeId: string }): holder is Holder {
  return holder !== null && holder.token === owner.token && holder.nodeId === owner.nodeId;
}

/** A lease's token base as stored (absent: 0), with the revision to compare when raising it. */
export function parseBase(kv: IKeyValue | undefined): { readonly base: bigint; readonly modRevision: string } {
  if (kv === undefined) return { base: 0n, modRevision: '0' };
  return { base: BigInt(kv.value.toString()), modRevision: kv.mod_revision };
}
