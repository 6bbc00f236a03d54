import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGuard } from '@fenced/consumer-guard';
import { createCoordinator, createScheduler, type Coordinator } from '@fenced/coordinator';
import { createEnvelope, parseToken } from '@fenced/shared';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, createTestSchema, deleteKeys, serveCli, testDatabaseUrl, testRedisUrl, uniquePrefix, waitFor } from '#test-support';

// The status page as an operator sees it: `fenced status --serve` as its own process, the page in
// headless Chromium, and a failover, a refused write and a late job caused here while it watches.

let schema: Awaited<ReturnType<typeof createTestSchema>>;
let redis: Redis;
let out: string;
const stops: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  schema = await createTestSchema('spage');
  redis = createRedis();
  out = mkdtempSync(join(tmpdir(), 'fenced-status-page-'));
});
afterAll(async () => {
  for (const stop of stops.reverse()) await stop().catch(() => {});
  redis.disconnect();
  await schema.drop();
  rmSync(out, { recursive: true, force: true });
});

describe('the status page', () => {
  it('shows leaders and tokens, the elections, late jobs and refused writes, and follows a failover', async () => {
    const prefix = uniquePrefix('spage');
    stops.push(() => deleteKeys(redis, prefix));
    const resource = `billing-${prefix}`;
    const guard = createGuard({ db: schema.pool, redis, resource, schema: schema.name, keyPrefix: prefix });
    await guard.migrate();
    const handle = guard.wrapHandler((_payload, ctx) => ctx.guardedWrite(async () => undefined), { onStale: 'return' });
    const node = (nodeId: string): Coordinator => {
      // A long TTL: the handover below is a graceful stop (B takes over at once), and A must keep the
      // lease while the browser and the CLI start on a loaded machine (a 2 s TTL lapsed there in CI).
      const coordinator = createCoordinator({ redis, lease: 'billing', keyPrefix: prefix, nodeId, ttlMs: 10_000, renewIntervalMs: 500, acquireRetryMs: 100, fences: [guard] });
      const scheduler = createScheduler({
        coordinator,
        jobs: {
          invoices: { everyMs: 250, handler: (envelope) => handle(envelope) },
          // A job whose handler takes longer than its interval: each fire starts later than the last.
          reports: { everyMs: 250, handler: () => new Promise((resolve) => setTimeout(resolve, 500)) },
        },
      });
      scheduler.start();
      stops.push(() => coordinator.stop(), () => scheduler.stop());
      return coordinator;
    };
    const a = node('node-a');
    await a.start();
    await waitFor(() => a.isLeader(), 10_000);
    const tokenA = a.token()!.toString();
    const b = node('node-b');
    await b.start();

    const server = await serveCli(['status', '--serve', '--port', '0', '--refresh', '300ms', '--json', '--redis', testRedisUrl(), '--database', testDatabaseUrl(), '--schema', schema.name, '--prefix', prefix]);
    stops.push(() => server.stop());
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    stops.push(() => browser.close());
    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    await page.goto(server.url);
    expect(await page.title()).toBe('fenced status');

    const leaseRow = page.locator('#leases tbody tr[data-lease="billing"]');
    await waitFor(async () => (await leaseRow.getAttribute('data-leader')) === 'node-a', 20_000, 50);
    expect(await leaseRow.getAttribute('data-token')).toBe(tokenA);
    expect(await leaseRow.locator('td.leader').textContent()).toBe('node-a');

    // Failover: A gives the lease up (a deploy), B is elected with a higher token.
    await a.stop();
    await waitFor(() => b.isLeader(), 10_000);
    const tokenB = b.token()!.toString();
    expect(BigInt(tokenB)).toBeGreaterThan(BigInt(tokenA));
    await waitFor(async () => (await leaseRow.getAttribute('data-leader')) === 'node-b', 20_000, 50);
    expect(await leaseRow.getAttribute('data-token')).toBe(tokenB);
    // The timeline holds both elections, in token order, each with its node.
    await waitFor(async () => (await page.locator('#timeline g.election').count()) === 2, 20_000, 50);
    const elections = await page.locator('#timeline g.election').evaluateAll((els) => els.map((e) => `${e.getAttribute('data-node')}:${e.getAttribute('data-token')}`));
    expect(elections).toEqual([`node-a:${tokenA}`, `node-b:${tokenB}`]);
    // A time scale under the lanes (ending at "now"), and a legend whose swatch for each node has
    // the colour of that node's dots.
    const ticks = await page.locator('#timeline g.axis text.tick').allTextContents();
    expect(ticks[0]).toBe('now');
    expect(ticks.length).toBeGreaterThan(1);
    // Both read in one evaluation, one task of the page: the page re-renders the timeline as it
    // polls, and a swatch read from an element replaced in between has no computed style (read in
    // two steps, the swatch came back '' beside four CPU hogs).
    for (const node of ['node-a', 'node-b']) {
      const { dot, swatch } = await page.evaluate((n) => {
        const doc = (globalThis as unknown as { document: { querySelector(s: string): { getAttribute(a: string): string | null } | null } }).document;
        const style = (globalThis as unknown as { getComputedStyle(e: unknown): { backgroundColor: string } }).getComputedStyle;
        const swatchEl = doc.querySelector(`#timeline .legend-item[data-node="${n}"] .swatch`);
        return { dot: doc.querySelector(`#timeline g.election[data-node="${n}"] circle`)?.getAttribute('fill') ?? null, swatch: swatchEl === null ? null : style(swatchEl).backgroundColor };
      }, node);
      expect(dot).toMatch(/^#[0-9a-f]{6}$/i);
      const [r, g, b] = [1, 3, 5].map((i) => parseInt(dot!.slice(i, i + 2), 16));
      expect(swatch).toBe(`rgb(${r}, ${g}, ${b})`);
    }

    // A's last fire, delivered late with its old token: refused, and listed with its fire id.
    const stale = createEnvelope({ job: 'invoices', scheduledAt: Date.UTC(2026, 11, 1, 8), token: parseToken(tokenA), issuer: 'node-a', payload: null });
    expect((await handle(stale)).status).toBe('stale');
    const refusal = page.locator(`#refusals tbody tr[data-resource="${resource}"]`);
    await waitFor(async () => (await refusal.count()) === 1, 20_000, 50);
    expect(await refusal.locator('td').allTextContents()).toEqual([resource, expect.any(String), tokenA, tokenB, 'redis', stale.fireId]);
    expect(await page.locator(`#resources tbody tr[data-resource="${resource}"]`).getAttribute('class')).toBe('refused');

    // The slow job's fires fall behind their due times: the page marks it late, the other job not.
    await waitFor(async () => (await page.locator('#jobs tbody tr.late[data-job="reports"]').count()) === 1, 20_000, 50);
    expect((await page.locator('#jobs tbody tr[data-job="invoices"]').first().getAttribute('class')) ?? '').not.toContain('late');
    expect(await page.locator('#error').textContent()).toBe('');

    const shot = join(process.env['FENCED_STATUS_SHOT_DIR'] ?? out, 'status.png');
    await page.screenshot({ path: shot, fullPage: true });
    expect(readFileSync(shot).length).toBeGreaterThan(10_000);
  });
});
