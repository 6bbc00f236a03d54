/**
 * fenced with BullMQ: the scheduler enqueues each fire into a BullMQ queue (job id: the fire's
 * dispatch key), two workers run the wrapped handler as their processor.
 *
 *   pnpm example:bullmq      (DATABASE_URL, REDIS_URL, or the loopback defaults)
 */
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { toProcessor } from '@fenced/consumer-guard';
import { runQueueTour } from './tour.js';

await runQueueTour('BullMQ', async ({ redisUrl, schema, guard, ledger, onOutcome }) => {
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const prefix = `bull-${schema}`;
  const queue = new Queue('ledger', { connection, prefix });
  const handle = guard.wrapHandler(
    (_payload, ctx) => ctx.guardedWrite((client) => client.query(`INSERT INTO ${ledger} (fire_id, token) VALUES ($1, $2)`, [ctx.fireId, ctx.token.toString()])),
    { onStale: 'return' },
  );
  const process_ = toProcessor(handle);
  const workers = [1, 2].map(() => new Worker('ledger', async (job) => {
    const status = await process_(job);
    onOutcome(status);
    return status;
  }, { connection, prefix }));
  return {
    target: queue,
    async stop() {
      await Promise.all(workers.map((w) => w.close()));
      await queue.obliterate({ force: true });
      await queue.close();
      connection.disconnect();
    },
  };
});
