/**
 * Where a backend keeps its state in etcd, under one prefix (default `fenced/`):
 *
 * - `<prefix>lease/<name>`: the lease itself, attached to its holder's etcd lease (it vanishes when
 *   that expires). Its value is JSON `{ n: nodeId, b: base, l: etcd lease id }`; the token is `b` plus
 *   the key's create_revision, both fixed when the key is created.
 * - `<prefix>base/<name>`: the lease's token base, a decimal (absent: 0). Only ever raised, by a
 *   counter repair, so tokens keep growing across it.
 * - `<prefix>fires/<name>/<field>`: the scheduler's record (job → last fire, and its marks).
 * - `<prefix>elections/<name>/<token, 20 digits>`: the record of elections operators read.
 * - `<prefix>group/<group>/<member>`: a lease group's live members, each on its member's etcd lease.
 */
export interface EtcdKeys {
  readonly prefix: string;
  lease(name: string): Buffer;
  /** The range of every lease key: what one watch follows for a whole process. */
  readonly leases: { readonly start: Buffer; readonly end: Buffer };
  leaseName(key: Buffer): string;
  base(name: string): Buffer;
  fires(name: string): { readonly start: Buffer; readonly end: Buffer; field(field: string): Buffer; fieldOf(key: Buffer): string };
  elections(name: string): { readonly start: Buffer; readonly end: Buffer; entry(token: bigint): Buffer };
  group(group: string): { readonly start: Buffer; readonly end: Buffer; member(member: string): Buffer; memberOf(key: Buffer): string };
}

/** The end of the range of every key that starts with `prefix` (etcd's prefix range). */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

function range(prefix: string) {
  const start = Buffer.from(prefix);
  return { start, end: prefixEnd(start) };
}

export function etcdKeys(prefix: string): EtcdKeys {
  const leasePrefix = `${prefix}lease/`;
  return {
    prefix,
    lease: (name) => Buffer.from(leasePrefix + name),
    leases: range(leasePrefix),
    leaseName: (key) => key.toString().slice(leasePrefix.length),
    base: (name) => Buffer.from(`${prefix}base/${name}`),
    fires(name) {
      const p = `${prefix}fires/${name}/`;
      return { ...range(p), field: (field) => Buffer.from(p + field), fieldOf: (key) => key.toString().slice(p.length) };
    },
    elections(name) {
      const p = `${prefix}elections/${name}/`;
      return { ...range(p), entry: (token) => Buffer.from(p + token.toString().padStart(20, '0')) };
    },
    group(group) {
      const p = `${prefix}group/${group}/`;
      return { ...range(p), member: (member) => Buffer.from(p + member), memberOf: (key) => key.toString().slice(p.length) };
    },
  };
}
