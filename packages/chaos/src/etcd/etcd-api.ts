/**
 * The few calls the supervisor makes of an etcd member, through its JSON gateway (`/v3/…` on the
 * client port, etcd 3.4): no client library, so that the toolkit imports nothing of what it tests.
 * The gateway writes 64-bit integers as decimal strings.
 */
export interface EtcdMemberStatus {
  readonly memberId: string;
  readonly leader: string;
  readonly raftTerm: bigint;
  readonly revision: bigint;
}

export interface EtcdMemberEntry {
  readonly id: string;
  readonly name: string;
  readonly peerURLs: readonly string[];
}

export function etcdApi(baseUrl: string) {
  async function call<T>(path: string, body: unknown, timeoutMs: number): Promise<T> {
    const response = await fetch(`${baseUrl}${path}`, { method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
    const text = await response.text();
    if (!response.ok) throw new Error(`etcd ${path} answered ${response.status}: ${text}`);
    return JSON.parse(text) as T;
  }
  return {
    async status(timeoutMs: number): Promise<EtcdMemberStatus> {
      const s = await call<{ header: { member_id: string; revision?: string }; leader?: string; raftTerm?: string }>('/v3/maintenance/status', {}, timeoutMs);
      return { memberId: s.header.member_id, leader: s.leader ?? '0', raftTerm: BigInt(s.raftTerm ?? '0'), revision: BigInt(s.header.revision ?? '0') };
    },
    async memberList(timeoutMs: number): Promise<EtcdMemberEntry[]> {
      const r = await call<{ members?: Array<{ ID: string; name?: string; peerURLs?: string[] }> }>('/v3/cluster/member/list', {}, timeoutMs);
      return (r.members ?? []).map((m) => ({ id: m.ID, name: m.name ?? '', peerURLs: m.peerURLs ?? [] }));
    },
    async memberRemove(id: string, timeoutMs: number): Promise<void> {
      await call('/v3/cluster/member/remove', { ID: id }, timeoutMs);
    },
    async memberAdd(peerUrl: string, timeoutMs: number): Promise<void> {
      await call('/v3/cluster/member/add', { peerURLs: [peerUrl] }, timeoutMs);
    },
  };
}
