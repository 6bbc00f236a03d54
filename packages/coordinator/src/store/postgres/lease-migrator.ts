import type { FencedLogger } from '@fenced/shared';
import { applyMigrations, emit, numberedMigrations } from '@fenced/shared/internal';
import { sqlFiles } from './migrations/generated-sql.js';
import { renderLeaseMigration, type LeaseObjectNames } from './lease-names.js';
import type { PgLeasePool } from './pg-pool.js';

const migrations = numberedMigrations(sqlFiles);

/** The newest migration of the lease store this version knows. */
export const LATEST_LEASE_MIGRATION = migrations[migrations.length - 1]!.id;

/**
 * Creates or updates the lease store's objects in one transaction (the numbered series of
 * migrations/, refused when the database is ahead of this version). Idempotent; safe from many
 * processes at once. The client it holds is listened to for its whole checkout and released with
 * its error when it failed, so the pool destroys it.
 */
export async function migrateLeases(pool: PgLeasePool, names: LeaseObjectNames, logger: FencedLogger | undefined): Promise<void> {
  const client = await pool.connect();
  let lost: Error | undefined;
  const onError = (err?: Error) => (lost ??= err ?? new Error('connection failed'));
  client.on('error', onError);
  let applied: number[] = [];
  try {
    await client.query('BEGIN');
    applied = await applyMigrations(async ({ text, values }) => (await client.query(text, [...values])).rows as Record<string, unknown>[], {
      installation: names.installation,
      schema: names.schema,
      migrationsTable: names.migrations,
      migrations: migrations.map((m) => ({ id: m.id, text: renderLeaseMigration(m.text, names) })),
    });
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch((rollbackError: Error) => onError(rollbackError));
    throw err;
  } finally {
    client.release(lost ?? false);
  }
  const [schema, table] = names.installation.split('.') as [string, string];
  for (const id of applied) emit(logger, { type: 'migration.applied', schema, table, id });
}
