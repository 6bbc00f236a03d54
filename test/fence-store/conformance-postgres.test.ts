import { createGuard } from '@fenced/consumer-guard';
import { createPostgresGuard, postgresFences } from '@fenced/consumer-guard/postgres';
import { createTestSchema, waitForLockWait } from '#test-support';
import type pg from 'pg';
import { describeFenceStoreConformance } from './conformance.js';

let schema: Awaited<ReturnType<typeof createTestSchema>>;

describeFenceStoreConformance({
  name: 'postgres',
  async setup() {
    schema = await createTestSchema('fence_conf');
    await schema.pool.query('CREATE TABLE effects (id bigserial PRIMARY KEY, resource text NOT NULL, token bigint NOT NULL)');
  },
  teardown: () => schema.drop(),
  guard: (resource, settings = {}) => createPostgresGuard({ db: schema.pool, schema: schema.name, resource, ...settings }),
  async insertEffect(trx, resource, token) {
    await (trx as pg.PoolClient).query('INSERT INTO effects (resource, token) VALUES ($1, $2)', [resource, token.toString()]);
  },
  async countEffectsIn(trx, resource) {
    const { rows } = await (trx as pg.PoolClient).query('SELECT count(*)::int AS n FROM effects WHERE resource = $1', [resource]);
    return (rows[0] as { n: number }).n;
  },
  async effects(resource) {
    const { rows } = await schema.pool.query('SELECT token::text AS token FROM effects WHERE resource = $1 ORDER BY id', [resource]);
    return rows.map((row: { token: string }) => BigInt(row.token));
  },
  async sessionOf(trx) {
    const { rows } = await (trx as pg.PoolClient).query('SELECT pg_backend_pid() AS pid');
    return String((rows[0] as { pid: number }).pid);
  },
  async kill(session) {
    await schema.pool.query('SELECT pg_terminate_backend($1)', [Number(session)]);
  },
  waitForLockWait: (sessions) => waitForLockWait(schema.pool, '', 20_000, sessions),
  async recordNewerMigration() {
    await schema.pool.query(`INSERT INTO "${schema.name}".fenced_fences_migrations (id) VALUES (999999)`);
    return { undo: async () => void (await schema.pool.query(`DELETE FROM "${schema.name}".fenced_fences_migrations WHERE id = 999999`)) };
  },
  writeIn: {
    guard: (resource) => createGuard({ store: postgresFences({ db: schema.pool, schema: schema.name }), resource }),
    async begin() {
      const client = await schema.pool.connect();
      // Heard while the caller holds the client, as a queue's worker does; released with its error.
      let lost: Error | undefined;
      const onError = (err: Error) => void (lost = err);
      client.on('error', onError);
      await client.query('BEGIN');
      const end = async (statement: string) => {
        try {
          await client.query(statement);
        } catch (err) {
          lost ??= err as Error;
          throw err;
        } finally {
          client.off('error', onError);
          client.release(lost);
        }
      };
      return { tx: { executeSql: (text, values) => client.query(text, values) }, commit: () => end('COMMIT'), rollback: () => end('ROLLBACK') };
    },
    async insertEffectIn(tx, resource, token) {
      await tx.executeSql('INSERT INTO effects (resource, token) VALUES ($1, $2)', [resource, token.toString()]);
    },
    async countEffectsIn(tx, resource) {
      const { rows } = await tx.executeSql('SELECT count(*)::int AS n FROM effects WHERE resource = $1', [resource]);
      return (rows[0] as { n: number }).n;
    },
  },
});
