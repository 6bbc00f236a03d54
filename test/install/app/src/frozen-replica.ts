/**
 * One replica of a new user's service, compiled against the installed tarballs: it leads a Redis
 * lease with the PostgreSQL guard as its fence and, while it leads, makes a guarded write every 50 ms.
 * With FREEZE_AFTER_WRITES=n, the function of its (n+1)th write stops the whole process (SIGSTOP)
 * after its INSERT: inside the transaction, the fence row locked, no COMMIT yet (a hung VM, a
 * stopped container). Its pool has no `error` listener of the app's own: the guard must be the one
 * that listens. Prints JSON lines: started, elected, lost, write (with its outcome and error code).
 *
 * Env: DATABASE_URL, REDIS_URL, SCHEMA (holding `ledger (id text, token bigint)`), KEY_PREFIX,
 * FREEZE_AFTER_WRITES (optional).
 */
import { createCoordinator } from '@fenced/coordinator';
import { createPostgresGuard } from '@fenced/consumer-guard/postgres';
import { Redis } from 'ioredis';
import pg from 'pg';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is required`);
  return value;
};
const line = (record: Record<string, unknown>) => process.stdout.write(`${JSON.stringify({ ...record, t: Math.round(performance.now()) })}\n`);
const schema = env('SCHEMA');
const freezeAfter = process.env['FREEZE_AFTER_WRITES'] === undefined ? undefined : Number(process.env['FREEZE_AFTER_WRITES']);

const pool = new pg.Pool({ connectionString: env('DATABASE_URL'), max: 3 });
const guard = createPostgresGuard({ db: pool, resource: 'frozen', schema });
const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1 });
redis.on('error', () => {});
const coordinator = createCoordinator({ redis, lease: 'frozen', keyPrefix: env('KEY_PREFIX'), ttlMs: 3_000, renewIntervalMs: 1_000, fences: [guard] });

let committed = 0;
let writing = false;
async function writeWhileLeading(): Promise<void> {
  if (writing) return;
  writing = true;
  try {
    for (let n = 0; ; n++) {
      const term = coordinator.currentTerm();
      if (term === null) return;
      const id = `${process.pid}-${term.token}-${n}`;
      const freeze = committed === freezeAfter;
      try {
        await guard.guardedWrite(term.token, async (client: pg.PoolClient) => {
          await client.query(`INSERT INTO ${schema}.ledger (id, token) VALUES ($1, $2)`, [id, term.token.toString()]);
          if (freeze) {
            line({ kind: 'freezing', id });
            process.kill(process.pid, 'SIGSTOP');
          }
        });
        committed++;
        line({ kind: 'write', id, token: term.token.toString(), outcome: 'committed' });
      } catch (err) {
        line({ kind: 'write', id, token: term.token.toString(), outcome: 'failed', code: (err as { code?: unknown }).code ?? null, message: (err as Error).message });
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    writing = false;
  }
}

coordinator.on('elected', ({ token }) => {
  line({ kind: 'elected', token: token.toString() });
  void writeWhileLeading();
});
coordinator.on('lost', ({ token, reason }) => line({ kind: 'lost', token: token.toString(), reason }));
await guard.migrate();
await coordinator.start();
line({ kind: 'started' });

process.on('SIGTERM', () => {
  void coordinator
    .stop()
    .then(() => pool.end())
    .finally(() => {
      redis.disconnect();
      process.exit(0);
    });
});
