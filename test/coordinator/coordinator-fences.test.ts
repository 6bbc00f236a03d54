import { createCoordinator, type Coordinator } from '@fenced/coordinator';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { isFencedError, type FencedEvent } from '@fenced/shared';
import { createRedis, createTestSchema, deleteKeys, uniquePrefix, waitFor } from '#test-support';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let redis: Redis;
let prefix: string;
const coordinators: Coordinator[] = [];

beforeAll(async () => {
  schema = await createTestSchema('cfence');
  redis = createRedis();
  await createPostgresGuard({ db: schema.pool, resource: 'x', schema: schema.name }).migrate();
});
afterAll(async () => {
  redis.disconnect();
  await schema.drop();
});
afterEach(async () => {
  await Promise.all(coordinators.splice(0).map((c) => c.stop()));
  await deleteKeys(redis, prefix);
});

const guardFor = (resource: string) => createPostgresGuard({ db: schema.pool, resource, schema: schema.name });

function coordinator(fences: ReturnType<typeof guardFor>[], logger?: (e: FencedEvent) => void): Coordinator {
  const c = createCoordinator({ redis, lease: 'billing', keyPrefix: prefix, ttlMs: 600, renewIntervalMs: 150, fences, ...(logger ? { logger } : {}) });
  coordinators.push(c);
  return c;
}

describe('fences advanced at election', () => {
  it('after Redis lost its counter, the next leader mints above the fence (50 → 51)', async () => {
    prefix = uniquePrefix('cfence');
    const billing = guardFor(`billing-${prefix}`);
    await billing.advance(50n); // the durable record: token 50 was used before Redis forgot
    const events: FencedEvent[] = [];
    const leader = coordinator([billing], (e) => events.push(e));
    await leader.start();
    await waitFor(() => leader.isLeader());
    expect(leader.token()).toBe(51n);
    expect(leader.regressions).toBe(1);
    expect(events.find((e) => e.type === 'token.regression')).toMatchObject({ token: 1n, fenceHighest: 50n });
    expect(await billing.highest()).toBe(51n);
  });

  it('a FLUSHALL-like loss mid-run: the re-elected leader still mints above every fence', async () => {
    prefix = uniquePrefix('cfence');
    const billing = guardFor(`billing-${prefix}`);
    const leader = coordinator([billing]);
    await leader.start();
    const first = leader.token()!;
    await billing.guardedWrite(first, async () => undefined);
    await deleteKeys(redis, prefix); // lease and counter gone, as after a restart without persistence
    await waitFor(() => leader.isLeader() && leader.token() !== first, 3000);
    expect(leader.token()!).toBeGreaterThan(first);
    await expect(billing.guardedWrite(first, async () => undefined)).rejects.toSatisfy((e: unknown) => isFencedError(e, 'STALE_TOKEN'));
  });

  it('fences the deposed leader on every resource at once, even ones the new leader never wrote', async () => {
    prefix = uniquePrefix('cfence');
    const invoices = guardFor(`invoices-${prefix}`);
    const ledger = guardFor(`ledger-${prefix}`);
    const old = coordinator([invoices, ledger]);
    await old.start();
    const oldToken = old.token()!;
    await invoices.guardedWrite(oldToken, async () => undefined);
    await old.stop();
    const next = coordinator([invoices, ledger]);
    await next.start();
    await waitFor(() => next.isLeader());
    // The old leader wakes up and writes to the ledger, which nobody touched since: refused.
    await expect(ledger.guardedWrite(oldToken, async () => undefined)).rejects.toSatisfy((e: unknown) => isFencedError(e, 'STALE_TOKEN'));
  });

  it('does not lead when a fence cannot be reached (fails closed)', async () => {
    prefix = uniquePrefix('cfence');
    const pg = await import('pg');
    const dead = new pg.default.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/test', max: 1 });
    dead.on('error', () => {});
    const unreachable = createPostgresGuard({ db: dead, resource: 'r', schema: schema.name });
    const events: FencedEvent[] = [];
    const node = coordinator([unreachable], (e) => events.push(e));
    await node.start();
    // Won the lease at least twice, failed to reach the fence each time, and never believed it led.
    const beliefs: boolean[] = [];
    await waitFor(() => {
      beliefs.push(node.isLeader());
      return events.filter((e) => e.type === 'fence.unavailable').length >= 2;
    }, 20_000);
    expect(beliefs.every((leading) => !leading)).toBe(true);
    expect(events.some((e) => e.type === 'lease.acquired')).toBe(false);
    await node.stop();
    await dead.end();
  });
});
