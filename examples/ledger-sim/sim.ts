/**
 * pnpm sim: the split-brain simulation of the ledger app. See `pnpm sim --help`.
 *
 * Without DATABASE_URL the database is found as the PostgreSQL-only Quick start finds it
 * (examples/postgres-only/database.ts): the local server (PGPORT or 5432), else a throwaway
 * PostgreSQL of its own from the npm registry, said in one line. So on a machine with nothing but
 * Node the simulation still runs what needs no more (the PostgreSQL lease store's scenarios), and
 * says what it left out; where the services are, it runs the full matrix.
 */
import { resolvePostgres, runSimCli, ServiceUnavailableError, type DatabaseResolver } from '@fenced/chaos';
import { quickStartDatabase, QuickStartDatabaseError } from '../postgres-only/database.js';
import { ledgerApp } from './app.js';

const database: DatabaseResolver = async (env, say) => {
  // A URL given is used as the simulation always has: loopback only, checked before any run.
  if (env['DATABASE_URL']) return resolvePostgres(env);
  try {
    const found = await quickStartDatabase(say);
    return { url: found.url, stop: () => found.close() };
  } catch (err) {
    if (err instanceof QuickStartDatabaseError) throw new ServiceUnavailableError(err.message);
    throw err;
  }
};

process.exitCode = await runSimCli(ledgerApp, process.argv.slice(2), undefined, database);
