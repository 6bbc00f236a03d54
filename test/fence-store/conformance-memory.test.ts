import { createMemoryFenceDatabase, createMemoryGuard, type MemoryTransaction } from '@fenced/consumer-guard/memory';
import { waitFor } from '#test-support';
import { describeFenceStoreConformance } from './conformance.js';

// One database is the store; each guard on it is one process's connection to it.
const database = createMemoryFenceDatabase();
type Effect = { readonly resource: string; readonly token: bigint };

describeFenceStoreConformance({
  name: 'memory',
  async setup() {},
  async teardown() {},
  guard: (resource, settings = {}) => createMemoryGuard({ database, resource, ...(settings.takeover === undefined ? {} : { takeover: settings.takeover }) }),
  async insertEffect(trx, resource, token) {
    (trx as MemoryTransaction).insert('effects', { resource, token });
  },
  async countEffectsIn(trx, resource) {
    return (trx as MemoryTransaction).rows('effects').filter((row) => (row as Effect).resource === resource).length;
  },
  async effects(resource) {
    return database
      .rows('effects')
      .filter((row) => (row as Effect).resource === resource)
      .map((row) => (row as Effect).token);
  },
  async sessionOf(trx) {
    return (trx as MemoryTransaction).session;
  },
  async kill(session) {
    database.kill(session);
  },
  waitForLockWait: () => waitFor(() => database.lockWaits > 0, 20_000),
  async recordNewerMigration() {
    database.migrations.add(999999);
    return { undo: async () => void database.migrations.delete(999999) };
  },
  writeIn: { without: 'the in-memory store has no transaction a caller could hold (its writes run in transactions of their own)' },
});
