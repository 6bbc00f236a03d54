/**
 * fenced with pg-boss: the scheduler sends each fire with a job id derived from its dispatch key, two
 * transactional workers run the wrapped handler, so each fire's ledger row commits with its job's
 * completion.
 *
 *   pnpm example:pg-boss      (DATABASE_URL, REDIS_URL, or the loopback defaults)
 */
import { PgBoss } from 'pg-boss';
import { pgBossQueue } from '@fenced/coordinator';
import { toPgBossHandler } from '@fenced/consumer-guard';
import { runQueueTour } from './tour.js';

await runQueueTour('pg-boss', async ({ databaseUrl, schema, guard, ledger, onOutcome }) => {
  const boss = new PgBoss({ connectionString: databaseUrl, schema: `${schema}_pgboss`, schedule: false });
  boss.on('error', () => {});
  await boss.start();
  await boss.createQueue('ledger');
  const handle = guard.wrapTransactionalHandler((_payload, ctx) =>
    ctx.guardedWrite((tx) => tx.executeSql(`INSERT INTO ${ledger} (fire_id, token) VALUES ($1, $2)`, [ctx.fireId, ctx.token.toString()])),
  );
  const process_ = toPgBossHandler(handle);
  for (let i = 0; i < 2; i++) {
    await boss.work('ledger', { transactional: true, pollingIntervalSeconds: 0.5 }, async (jobs, tx) => {
      const statuses = await process_(jobs, tx);
      statuses.forEach(onOutcome);
      return statuses;
    });
  }
  return {
    target: pgBossQueue(boss),
    async stop() {
      await boss.stop({ graceful: true, close: true });
    },
  };
});
