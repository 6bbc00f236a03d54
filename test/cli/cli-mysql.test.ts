// The fenced CLI on fences kept in MySQL/MariaDB (`--mysql`): status, doctor, fence show and lower,
// fires prune, each as its own OS process against the run's MariaDB.
import { createGuard } from '@fenced/consumer-guard';
import { createMysqlGuard, mysqlFences } from '@fenced/consumer-guard/mysql';
import { createRedis, createTestMysqlDatabase, deleteKeys, runCli, testMysqlUrl, testRedisUrl, uniquePrefix } from '#test-support';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let db: Awaited<ReturnType<typeof createTestMysqlDatabase>>;
let redis: Redis;
let url: string;
const prefix = uniquePrefix('climy');

beforeAll(async () => {
  db = await createTestMysqlDatabase('cli_mysql');
  const u = new URL(testMysqlUrl());
  u.pathname = `/${db.name}`;
  url = u.toString();
  redis = createRedis();
  const guard = createGuard({ store: mysqlFences({ db: db.pool }), resource: 'invoices', redis, keyPrefix: prefix });
  await guard.migrate();
  await guard.guardedWrite(40n, async () => undefined, { fireId: 'invoices@20261202T100000.000Z' });
  await guard.close();
});
afterAll(async () => {
  await deleteKeys(redis, prefix);
  redis.disconnect();
  await db.drop();
});

const connection = () => ['--mysql', url, '--redis', testRedisUrl(), '--prefix', prefix];

describe('fenced on MySQL fences', () => {
  it('status reads the fences, their applied fires and the Redis marks from MySQL', async () => {
    const run = await runCli(['status', ...connection(), '--json']);
    expect(run.code, run.stderr).toBe(0);
    const status = run.json<{ database: boolean; resources: Array<{ resource: string; fence: string | null; mark: string | null; appliedFires: number }> }>();
    expect(status.database).toBe(true);
    expect(status.resources.find((r) => r.resource === 'invoices')).toMatchObject({ resource: 'invoices', fence: '40', mark: '40', appliedFires: 1 });
  });

  it('doctor runs the MySQL checks (migrations, isolation, binlog, timeouts, applied fires) in place of PostgreSQL\'s', async () => {
    const run = await runCli(['doctor', ...connection(), '--json']);
    const report = run.json<{ checks: Array<{ id: string; verdict: string; detail: string }> }>();
    const ids = report.checks.map((c) => c.id);
    for (const id of ['mysql.migrations', 'mysql.isolation', 'mysql.binlog', 'mysql.timeouts', 'mysql.applied-fires']) expect(ids).toContain(id);
    expect(ids.some((id) => id.startsWith('postgres.'))).toBe(false);
    expect(report.checks.find((c) => c.id === 'mysql.migrations')).toMatchObject({ verdict: 'pass' });
    expect(report.checks.find((c) => c.id === 'mysql.migrations')!.detail).toMatch(/MariaDB|MySQL/);
    expect(report.checks.find((c) => c.id === 'mysql.isolation')!.detail).toContain('repeatable read');
  });

  it('fence lower lowers a MySQL fence as an audited act and resets the Redis mark; fence show reads it back; bad input changes nothing', async () => {
    const refused = await runCli(['fence', 'lower', ...connection(), '--resource', 'invoices', '--to', '41', '--actor', 'ops@example.com', '--reason', 'test']);
    expect(refused.code).toBe(2);
    expect(await createMysqlGuard({ db: db.pool, resource: 'invoices' }).highest()).toBe(40n);
    const run = await runCli(['fence', 'lower', ...connection(), '--resource', 'invoices', '--to', '12', '--actor', 'ops@example.com', '--reason', 'a forged token', '--json']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.json()).toMatchObject({ before: { fence: '40', mark: '40' }, after: { fence: '12', mark: '12' }, audit: { from: '40', to: '12', actor: 'ops@example.com' } });
    const shown = await runCli(['fence', 'show', ...connection(), '--resource', 'invoices', '--json']);
    expect(shown.json()).toMatchObject({ fence: '12', mark: '12', audit: [{ from: '40', to: '12', reason: 'a forged token' }] });
  });

  it('fence lower in a deployment with no Redis named touches no Redis: no mark is written at the default address (a regression)', async () => {
    const guard = createMysqlGuard({ db: db.pool, resource: 'payments' });
    await guard.guardedWrite(30n, async () => undefined);
    // REDIS_URL unset and no --redis: the deployment fences in MariaDB alone, though a Redis answers
    // at the default address (the run's own).
    const run = await runCli(['fence', 'lower', '--mysql', url, '--prefix', prefix, '--resource', 'payments', '--to', '5', '--actor', 'ops@example.com', '--reason', 'no redis here', '--json'], { REDIS_URL: undefined });
    expect(run.code, run.stderr).toBe(0);
    expect(run.json()).toMatchObject({ before: { fence: '30', mark: null }, after: { fence: '5', mark: null } });
    expect(await redis.keys(`${prefix}*payments*`)).toEqual([]);
    const shown = await runCli(['fence', 'show', '--mysql', url, '--prefix', prefix, '--resource', 'payments', '--json'], { REDIS_URL: undefined });
    expect(shown.json()).toMatchObject({ fence: '5', mark: null });
  });

  it('fires prune deletes old applied-fire records from MySQL; a URL that is not mysql:// is a usage error', async () => {
    const run = await runCli(['fires', 'prune', ...connection(), '--older-than', '1ms', '--json']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.json<{ deleted: number }>().deleted).toBeGreaterThanOrEqual(1);
    const wrong = await runCli(['fence', 'show', '--mysql', 'postgres://x@127.0.0.1/y', '--resource', 'invoices', '--no-mark']);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain('expected a mysql:// URL');
  });
});
