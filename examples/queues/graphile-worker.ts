/**
 * fenced with graphile-worker: the scheduler adds each fire as a job keyed by its dispatch key, two
 * runners run the wrapped handler as their task.
 *
 *   pnpm example:graphile-worker      (DATABASE_URL, REDIS_URL, or the loopback defaults)
 */
import { Logger, makeWorkerUtils, run } from 'graphile-worker';
import { graphileWorkerQueue } from '@fenced/coordinator';
import { toGraphileTask } from '@fenced/consumer-guard';
import { runQueueTour } from './tour.js';

await runQueueTour('graphile-worker', async ({ databaseUrl, schema, guard, ledger, onOutcome }) => {
  const gwSchema = `${schema}_graphile_worker`;
  const logger = new Logger(() => () => {});
  const utils = await makeWorkerUtils({ connectionString: databaseUrl, schema: gwSchema, logger });
  await utils.migrate();
  const handle = guard.wrapHandler(
    (_payload, ctx) => ctx.guardedWrite((client) => client.query(`INSERT INTO ${ledger} (fire_id, token) VALUES ($1, $2)`, [ctx.fireId, ctx.token.toString()])),
    { onStale: 'return' },
  );
  const task = toGraphileTask(async (envelope, call) => {
    const outcome = await handle(envelope, call);
    onOutcome(outcome.status);
    return outcome;
  });
  const runners = await Promise.all(
    [1, 2].map(() => run({ connectionString: databaseUrl, schema: gwSchema, concurrency: 1, noHandleSignals: true, pollInterval: 100, logger, taskList: { ledger: task } })),
  );
  return {
    target: graphileWorkerQueue(utils),
    async stop() {
      await Promise.all(runners.map((r) => r.stop()));
      await utils.withPgClient((client) => client.query(`DROP SCHEMA ${gwSchema} CASCADE`));
      await utils.release();
    },
  };
});
