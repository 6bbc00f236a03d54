import { leaseKeys, parseLeaseValue } from '@fenced/coordinator';
import { scanKeys, type RedisTarget } from '../connections.js';
import { jobsOfRecord, type ElectionRecord, type LeaseStatus } from './status-types.js';

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The leases of the Redis lease store (`redisLeases`) under `keyPrefix`: holder, token, time left,
 * counter, the record of fires and the last elections, with the Redis server's clock as `now`.
 */
export async function readRedisLeases(redis: RedisTarget, keyPrefix: string, only: readonly string[] | undefined, history: number): Promise<{ now: number; leases: LeaseStatus[] }> {
  const now = await serverNow(redis);
  const names = only ?? (await leaseNames(redis, keyPrefix));
  return { now, leases: await Promise.all(names.map((lease) => readLease(redis, keyPrefix, lease, history))) };
}

/** The server's clock, read once, so every age in the report counts from the same instant. */
async function serverNow(redis: RedisTarget): Promise<number> {
  const [seconds, micros] = await redis.client.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** The names of the leases under `keyPrefix`: every lease that ever minted a token has a counter. */
export async function leaseNames(redis: RedisTarget, keyPrefix: string): Promise<string[]> {
  const suffix = '}:token';
  const head = `${keyPrefix}:{`;
  return (await scanKeys(redis, `${keyPrefix}:{*}:token`))
    .filter((key) => key.startsWith(head) && key.endsWith(suffix))
    .map((key) => key.slice(head.length, -suffix.length))
    .filter((name) => /^[A-Za-z0-9_.-]{1,64}$/.test(name));
}

async function readLease(redis: RedisTarget, keyPrefix: string, lease: string, history: number): Promise<LeaseStatus> {
  const keys = leaseKeys(keyPrefix, lease);
  const client = redis.client;
  const [value, pttl, counter, fires, entries] = await Promise.all([
    client.get(keys.lease),
    client.pttl(keys.lease),
    client.get(keys.counter),
    client.hgetall(keys.fires),
    client.xrevrange(keys.elections, '+', '-', 'COUNT', history),
  ]);
  const holder = value === null ? null : parseLeaseValue(value);
  const jobs = jobsOfRecord(fires);
  const elections = entries.map(([id, flat]): ElectionRecord => {
    const f = fieldsOf(flat);
    return { at: iso(Number(id.split('-')[0])), token: f['token'] ?? '?', node: f['node'] ?? '?', ttlMs: Number(f['ttl'] ?? NaN), fences: Number(f['fences'] ?? NaN), regressed: f['regressed'] === '1' };
  });
  const gap = fires[':failover-gap'];
  return {
    lease,
    leader: holder === null ? null : { node: holder.nodeId, token: holder.token.toString() },
    timeLeftMs: holder === null || pttl < 0 ? null : pttl,
    counter,
    jobs,
    failoverGapMs: gap === undefined ? null : Number(gap),
    elections,
  };
}

/** A Redis stream entry's fields, from the flat list XRANGE answers. */
export function fieldsOf(flat: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]!] = flat[i + 1]!;
  return out;
}
