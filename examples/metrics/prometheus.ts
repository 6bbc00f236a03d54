/**
 * fenced's instruments on a Prometheus endpoint, and its events as pino JSON lines: a leader, a
 * scheduler dispatching a fire every 250 ms through a guarded handler, a stale fire refused; then the
 * example scrapes its own endpoint once and prints the fenced series.
 *
 *   pnpm example:metrics     (DATABASE_URL, REDIS_URL or the loopback defaults; METRICS_PORT, default 9464)
 *
 * The two lines that matter for your service: the MeterProvider with the Prometheus exporter as its
 * reader (register it before creating coordinators and guards, or pass it as `meterProvider`), and
 * `logger: (event) => log.info(event, event.type)`.
 */
import { randomBytes } from 'node:crypto';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { metrics } from '@opentelemetry/api';
import { pino } from 'pino';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createCoordinator, createScheduler } from '@fenced/coordinator';
import { createGuard } from '@fenced/consumer-guard';
import { createEnvelope, parseToken } from '@fenced/shared';

const port = Number(process.env['METRICS_PORT'] ?? 9464);
// Serves http://127.0.0.1:<port>/metrics; Prometheus scrapes it.
const exporter = new PrometheusExporter({ host: '127.0.0.1', port });
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [exporter] }));
// Every fenced event as one JSON line (tokens are bigints: pino writes them as numbers).
const log = pino();
const logger = (event: { type: string }) => log.info(event, event.type);

const suffix = randomBytes(3).toString('hex');
const schema = `metrics_${suffix}`;
const keyPrefix = `metrics-${suffix}`;
const pool = new pg.Pool({ connectionString: process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test' });
// An idle client whose server goes away (a restart, a failover) emits `error` on the pool: without a
// listener that ends the process. The pool drops that client and connects a new one when asked.
pool.on('error', (err) => process.stderr.write(`pool: ${err.message}\n`));
const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');

await pool.query(`CREATE SCHEMA ${schema}`);
try {
  const guard = createGuard({ db: pool, redis, resource: 'billing', schema, keyPrefix, logger });
  await guard.migrate();
  const coordinator = createCoordinator({ redis, lease: 'billing', keyPrefix, ttlMs: 3000, renewIntervalMs: 500, fences: [guard], logger });
  const handle = guard.wrapHandler((_payload, ctx) => ctx.guardedWrite(async () => undefined), { onStale: 'return' });
  let applied = 0;
  const scheduler = createScheduler({ coordinator, logger, jobs: { invoices: { everyMs: 250, handler: async (envelope) => void ((await handle(envelope)).status === 'applied' && applied++) } } });
  scheduler.start();
  await coordinator.start();
  while (applied < 2) await new Promise((resolve) => setTimeout(resolve, 50));
  // A deploy: the leader steps down and is elected again, with the next token.
  await coordinator.stop();
  await coordinator.start();
  while (applied < 4) await new Promise((resolve) => setTimeout(resolve, 50));
  // A fire of the first term delivered late: refused.
  await handle(createEnvelope({ job: 'invoices', scheduledAt: Date.UTC(2026, 11, 1), token: parseToken(coordinator.token()! - 1n), issuer: 'old-leader', payload: null }));

  const scraped = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  await scheduler.stop();
  await coordinator.stop();
  process.stdout.write(`--- scraped http://127.0.0.1:${port}/metrics (fenced series) ---\n`);
  for (const line of scraped.split('\n')) if (/^fenced_\w+(\{|\s)/.test(line) && !/_bucket\{/.test(line)) process.stdout.write(`${line}\n`);
} finally {
  await pool.query(`DROP SCHEMA ${schema} CASCADE`);
  const stale = await redis.keys(`${keyPrefix}*`);
  if (stale.length > 0) await redis.del(...stale);
  redis.disconnect();
  await pool.end();
  await exporter.shutdown();
}
