/**
 * A small fenced deployment to point `fenced status`, `fenced doctor` and the status page at: two
 * nodes contend for the lease `billing` (a fire every second for `invoices`, every 5 s for
 * `reports`), node-a steps down after a few seconds (a deploy) and node-b takes over, and a fire of
 * node-a's term delivered late is refused. Runs until Ctrl-C (or `--seconds N`), then cleans up.
 *
 *   pnpm example:operate                        (DATABASE_URL, REDIS_URL or the loopback defaults)
 *   pnpm fenced status --prefix fenced-demo --schema fenced_demo      (in another terminal)
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createCoordinator, createScheduler, type Coordinator } from '@fenced/coordinator';
import { createGuard } from '@fenced/consumer-guard';
import { createEnvelope } from '@fenced/shared';

const { values } = parseArgs({ options: { seconds: { type: 'string' } } });
const keyPrefix = 'fenced-demo';
const schema = 'fenced_demo';
const pool = new pg.Pool({ connectionString: process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test' });
// An idle client whose server goes away (a restart, a failover) emits `error` on the pool: without a
// listener that ends the process. The pool drops that client and connects a new one when asked.
pool.on('error', (err) => process.stderr.write(`pool: ${err.message}\n`));
const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
const say = (line: string) => process.stdout.write(`${line}\n`);

await pool.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
const guard = createGuard({ db: pool, redis, resource: 'billing', schema, keyPrefix });
await guard.migrate();
const handle = guard.wrapHandler((_payload, ctx) => ctx.guardedWrite(async () => undefined), { onStale: 'return' });

const stops: Array<() => Promise<void>> = [];
function node(nodeId: string): Coordinator {
  const coordinator = createCoordinator({ redis, lease: 'billing', keyPrefix, nodeId, ttlMs: 5000, renewIntervalMs: 1000, fences: [guard] });
  const scheduler = createScheduler({
    coordinator,
    jobs: { invoices: { everyMs: 1000, handler: (envelope) => handle(envelope) }, reports: { everyMs: 5000, handler: (envelope) => handle(envelope) } },
  });
  scheduler.start();
  stops.push(() => scheduler.stop(), () => coordinator.stop());
  coordinator.on('elected', ({ token }) => say(`${nodeId} elected with token ${token}`));
  return coordinator;
}

const a = node('node-a');
await a.start();
const b = node('node-b');
await b.start();
await new Promise((resolve) => setTimeout(resolve, 3000));
const old = a.token();
await a.stop(); // a deploy: node-a steps down, node-b is elected with the next token
if (old !== null) {
  await new Promise((resolve) => setTimeout(resolve, 500));
  const late = await handle(createEnvelope({ job: 'invoices', scheduledAt: Date.now() - 4000, token: old, issuer: 'node-a', payload: null }));
  say(`a fire of node-a's term (token ${old}) delivered late: ${late.status}`);
}
say('running; Ctrl-C to stop');

const seconds = values.seconds === undefined ? null : Number(values.seconds);
await new Promise<void>((resolve) => {
  process.once('SIGINT', resolve);
  process.once('SIGTERM', resolve);
  if (seconds !== null) setTimeout(resolve, seconds * 1000);
});
for (const stop of stops.reverse()) await stop();
await pool.query(`DROP SCHEMA ${schema} CASCADE`);
let cursor = '0';
do {
  const [next, keys] = await redis.scan(cursor, 'MATCH', `${keyPrefix}:*`, 'COUNT', 500);
  cursor = next;
  if (keys.length > 0) await redis.del(...keys);
} while (cursor !== '0');
redis.disconnect();
await pool.end();
