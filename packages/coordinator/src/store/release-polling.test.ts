import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ReleasePolling } from './release-polling.js';

// The poller's rule over a table of leases the test sets between looks: which subscriber hears
// what, look by look. The store's own answer (which leases are free, after which term) is tested by
// the lease-store suite on MySQL.
const POLL_MS = 50;

function poller() {
  const table = new Map<string, { holder: string | null; token: number }>();
  const polling = new ReleasePolling({
    pollMs: POLL_MS,
    reason: 'test',
    pollFree: async (leases) => leases.flatMap((lease) => {
      const row = table.get(lease);
      return row !== undefined && row.holder === null ? [{ lease, term: String(row.token) }] : [];
    }),
  });
  const heard: string[] = [];
  const subscribe = (lease: string, who: string) => polling.subscribe(lease, { onRelease: () => heard.push(`${who}:${lease}`), onError: () => {} });
  const grant = (lease: string, holder: string) => table.set(lease, { holder, token: (table.get(lease)?.token ?? 0) + 1 });
  const release = (lease: string) => table.set(lease, { holder: null, token: table.get(lease)!.token });
  const look = () => vi.advanceTimersByTimeAsync(POLL_MS);
  return { heard, subscribe, grant, release, look };
}

describe('release polling', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('hears a release once however many looks find the lease still free', async () => {
    const p = poller();
    p.grant('a', 'n1');
    await p.subscribe('a', 's1');
    await p.look();
    expect(p.heard).toEqual([]);
    p.release('a');
    await p.look();
    await p.look();
    await p.look();
    expect(p.heard).toEqual(['s1:a']);
  });

  it('hears again a lease taken and released between two looks, found free after a later term', async () => {
    const p = poller();
    p.grant('a', 'n1');
    await p.subscribe('a', 's1');
    p.release('a');
    await p.look();
    expect(p.heard).toEqual(['s1:a']);
    // Between two looks another process takes it and lets it go: free again, after its term.
    p.grant('a', 'n2');
    p.release('a');
    await p.look();
    expect(p.heard).toEqual(['s1:a', 's1:a']);
  });

  it('lets a subscriber that joins while a lease is free hear it at its first look, and the earlier one not again', async () => {
    const p = poller();
    p.grant('a', 'n1');
    p.release('a');
    await p.subscribe('a', 's1');
    await p.look();
    await p.subscribe('a', 's2');
    await p.look();
    expect(p.heard).toEqual(['s1:a', 's2:a']);
  });

  it('does not hear a lease released and taken again between two looks (it is held), nor anything after unsubscribe', async () => {
    const p = poller();
    p.grant('a', 'n1');
    const unsubscribe = await p.subscribe('a', 's1');
    p.release('a');
    p.grant('a', 'n2');
    await p.look();
    expect(p.heard).toEqual([]);
    unsubscribe();
    p.release('a');
    await p.look();
    expect(p.heard).toEqual([]);
  });
});
