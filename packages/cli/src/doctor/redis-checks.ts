import type { Redis } from 'ioredis';
import { loadIoredis, primaries, type RedisTarget } from '../connections.js';
import { fail, pass, warn, type CheckResult } from './check.js';

const nodeName = (node: Redis) => `${node.options.host ?? '?'}:${node.options.port ?? '?'}`;

/** CONFIG GET on one node as a map, or null when CONFIG is disabled (managed Redis often renames it). */
async function configOf(node: Redis, ...names: string[]): Promise<Map<string, string> | null> {
  try {
    const flat = (await node.config('GET', ...names)) as string[];
    const out = new Map<string, string>();
    for (let i = 0; i + 1 < flat.length; i += 2) out.set(flat[i]!, flat[i + 1]!);
    return out;
  } catch {
    return null;
  }
}

/** Evicting keys under memory pressure evicts leases and counters: two leaders, or a token minted twice. */
export async function evictionCheck(target: RedisTarget): Promise<CheckResult> {
  const id = 'redis.eviction';
  const bad: string[] = [];
  const unknown: string[] = [];
  for (const node of primaries(target)) {
    const config = await configOf(node, 'maxmemory-policy');
    const policy = config?.get('maxmemory-policy');
    if (policy === undefined) unknown.push(nodeName(node));
    else if (policy !== 'noeviction') bad.push(`${nodeName(node)} has ${policy}`);
  }
  if (bad.length > 0) {
    return fail(
      id,
      `maxmemory-policy must be noeviction: ${bad.join(', ')}. Under memory pressure Redis would evict a lease (a second leader is elected while the first still acts) or the token counter (the next election mints a token already used).`,
      'CONFIG SET maxmemory-policy noeviction on every primary, and put it in redis.conf (or your provider\'s parameter group); give Redis the memory it needs instead.',
    );
  }
  if (unknown.length > 0) return warn(id, `could not read maxmemory-policy on ${unknown.join(', ')} (CONFIG is disabled there).`, 'Check in your provider\'s settings that the eviction policy is noeviction.');
  return pass(id, 'maxmemory-policy is noeviction on every primary.');
}

/** What a restart keeps. Without persistence it keeps nothing; the fences make that safe, not free. */
export async function persistenceCheck(target: RedisTarget): Promise<CheckResult> {
  const id = 'redis.persistence';
  const found: string[] = [];
  let worst: 'pass' | 'warn' = 'pass';
  for (const node of primaries(target)) {
    const config = await configOf(node, 'appendonly', 'appendfsync', 'save');
    if (config === null) {
      found.push(`${nodeName(node)}: unknown (CONFIG disabled)`);
      worst = 'warn';
      continue;
    }
    const aof = config.get('appendonly') === 'yes';
    const fsync = config.get('appendfsync') ?? '?';
    const save = (config.get('save') ?? '').trim();
    if (aof) {
      found.push(`${nodeName(node)}: AOF, appendfsync ${fsync}`);
      if (fsync === 'no') worst = 'warn';
    } else {
      found.push(`${nodeName(node)}: ${save === '' ? 'no persistence' : `RDB snapshots only (save ${save})`}`);
      worst = 'warn';
    }
  }
  const detail = found.join('; ');
  if (worst === 'pass') {
    return pass(id, `${detail}. A restart keeps leases, counters and records up to the last fsync (with everysec: about a second).`);
  }
  return warn(
    id,
    `${detail}. A restart without an AOF forgets leases, token counters and the scheduler's records: the fences stay correct (the next election finds the fence ahead and raises the counter past it, the scheduler resumes from the applied fires in PostgreSQL), but every lease pays a re-election and fires queued but never applied in the look-back can be lost.`,
    'appendonly yes with appendfsync everysec (or always) on every primary.',
  );
}

/** Asynchronous replication: a promoted replica can miss the last INCR. */
export async function replicationCheck(target: RedisTarget): Promise<CheckResult> {
  const id = 'redis.replication';
  const found: string[] = [];
  let unguarded = false;
  for (const node of primaries(target)) {
    const info = await node.info('replication');
    const replicas = Number(/connected_slaves:(\d+)/.exec(info)?.[1] ?? 0);
    const min = Number((await configOf(node, 'min-replicas-to-write'))?.get('min-replicas-to-write') ?? NaN);
    found.push(`${nodeName(node)}: ${replicas} replica(s), min-replicas-to-write ${Number.isNaN(min) ? '?' : min}`);
    if (replicas > 0 && !(min >= 1)) unguarded = true;
  }
  if (unguarded) {
    return warn(
      id,
      `${found.join('; ')}. Replication is asynchronous: a failover can promote a replica that missed the last elections, and the counter goes back. The fences catch it (the next leader raises the counter past the highest fence, token.regression), but only where a fence is attached; and a deposed primary that resumes keeps taking writes until it is demoted.`,
      'CONFIG SET min-replicas-to-write 1 and a small min-replicas-max-lag (1-2 s) on the primaries, and attach a fence to every coordinator.',
    );
  }
  return pass(id, `${found.join('; ')}.`);
}

/** Sentinel: do the sentinels agree on the primary, and would a failover outlast the leases? */
export async function sentinelCheck(target: RedisTarget & { kind: 'sentinel' }, leaseTtls: readonly number[]): Promise<{ result: CheckResult; downAfterMs: number | null }> {
  const id = 'redis.sentinel';
  const answers: string[] = [];
  let downAfter: number | null = null;
  const { Redis } = await loadIoredis();
  for (const sentinel of target.sentinels) {
    const client = new Redis({ host: sentinel.host, port: sentinel.port, lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => {});
    try {
      await client.connect();
      const addr = (await client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', target.name)) as [string, string] | null;
      answers.push(addr === null ? 'unknown' : `${addr[0]}:${addr[1]}`);
      const flat = (await client.call('SENTINEL', 'MASTER', target.name)) as string[];
      const i = flat.indexOf('down-after-milliseconds');
      if (i >= 0) downAfter = Number(flat[i + 1]);
    } catch {
      answers.push('unreachable');
    } finally {
      client.disconnect();
    }
  }
  const named = answers.filter((a) => a !== 'unreachable' && a !== 'unknown');
  const majority = Math.floor(target.sentinels.length / 2) + 1;
  const agreed = named.length >= majority && new Set(named).size === 1;
  const clientNote = 'Every fenced client on Sentinel needs failoverDetector: true (the coordinator and the guard refuse a Sentinel client without it) so that it follows +switch-master at once.';
  if (!agreed) {
    return { downAfterMs: downAfter, result: { id, verdict: 'fail', detail: `the sentinels do not agree on the primary of ${target.name}: ${answers.join(', ')} (a majority of ${majority} must name one server). ${clientNote}`, fix: 'Bring the sentinels back and let them converge (SENTINEL CKQUORUM); the coordinator does not count a renew the sentinels do not confirm.' } };
  }
  const shortest = leaseTtls.length === 0 ? null : Math.min(...leaseTtls);
  if (downAfter !== null && shortest !== null && downAfter > shortest) {
    return { downAfterMs: downAfter, result: warn(
      id,
      `${named.length} of ${target.sentinels.length} sentinels name ${named[0]}; down-after-milliseconds ${downAfter} is longer than the shortest lease TTL (${shortest} ms): while a primary is down and not yet replaced, every lease expires and nothing is dispatched. ${clientNote}`,
      'Lower down-after-milliseconds below the lease TTL, or raise the TTL above it (safety does not depend on it; the gap without a leader does).',
    ) };
  }
  return { downAfterMs: downAfter, result: pass(id, `${named.length} of ${target.sentinels.length} sentinels name ${named[0]} as the primary of ${target.name}${downAfter === null ? '' : `; down-after-milliseconds ${downAfter}`}. ${clientNote}`) };
}

/** The clock offset between this host and the Redis server (the one fenced schedules by). */
export async function clockCheck(target: RedisTarget): Promise<CheckResult> {
  const id = 'clock.offset';
  let best: { rtt: number; offset: number } | null = null;
  for (let i = 0; i < 5; i++) {
    const sentAt = Date.now();
    const t0 = performance.now();
    const [seconds, micros] = await target.client.time();
    const rtt = performance.now() - t0;
    const server = Number(seconds) * 1000 + Number(micros) / 1000;
    const offset = server - (sentAt + rtt / 2);
    if (best === null || rtt < best.rtt) best = { rtt, offset };
  }
  const offset = Math.round(best!.offset);
  const detail = `this host's clock is ${Math.abs(offset)} ms ${offset > 0 ? 'behind' : 'ahead of'} the Redis server's (round trip ${best!.rtt.toFixed(1)} ms).`;
  if (Math.abs(offset) <= 1000) return pass(id, `${detail} fenced takes due times from the server's clock and lease deadlines from each host's monotonic clock, so an offset does not move either.`);
  return warn(
    id,
    `${detail} fenced itself does not depend on it (due times come from the server's clock, deadlines from the monotonic clock), but your own timestamps, logs and queue libraries that use wall clocks do.`,
    'Run NTP (chrony, systemd-timesyncd) on this host and on the Redis servers.',
  );
}

/**
 * What Redis must keep, whatever it holds: the token counter not evicted, the keys persisted, the
 * writes replicated (on the Redis lease store, and as the guard's fast path beside another).
 */
export async function redisDurabilityChecks(target: RedisTarget): Promise<CheckResult[]> {
  return [await evictionCheck(target), await persistenceCheck(target), await replicationCheck(target)];
}
