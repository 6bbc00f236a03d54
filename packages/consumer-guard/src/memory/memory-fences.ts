import { ConfigError, parseResource, type FencedLogger } from '@fenced/shared';
import type { MeterProvider } from '@opentelemetry/api';
import { fenceGuardOver, type FenceGuard } from '../fence-guard.js';
import type { FenceStoreContext, FenceStoreFactory } from '../fence-store.js';
import { GuardMetrics } from '../metrics/guard-metrics.js';
import type { TakeoverPolicy } from '../takeover/advance-with-takeover.js';
import { MemoryFenceDatabase, type MemoryTransaction } from './memory-database.js';
import { memoryFenceStore, type MemoryStoreOptions } from './memory-store.js';

export interface MemoryFencesOptions {
  /** The state every guard of the test shares (`createMemoryFenceDatabase()`). */
  readonly database: MemoryFenceDatabase;
  /**
   * The election-time takeover of a frozen writer of a lower token, as on the SQL stores.
   * @defaultValue `{ graceMs: 250, timeoutMs: 10_000 }`
   */
  readonly takeover?: TakeoverPolicy | false;
}

const DEFAULT_TAKEOVER = Object.freeze({ graceMs: 250, timeoutMs: 10_000 });

function storeOptions(component: string, input: MemoryFencesOptions): MemoryStoreOptions {
  if (!(input?.database instanceof MemoryFenceDatabase)) throw new ConfigError(component, [{ path: 'database', message: 'must be createMemoryFenceDatabase()' }]);
  const takeover = input.takeover ?? DEFAULT_TAKEOVER;
  if (takeover !== false && !(Number.isInteger(takeover.graceMs) && takeover.graceMs >= 0 && Number.isInteger(takeover.timeoutMs) && takeover.timeoutMs >= 1)) {
    throw new ConfigError(component, [{ path: 'takeover', message: 'must be false or { graceMs >= 0, timeoutMs >= 1 } in whole milliseconds' }]);
  }
  return { database: input.database, takeover };
}

/**
 * Fences in memory, for `createGuard({ store })`: examples, a user's unit tests and a deterministic
 * simulator. It keeps every promise the SQL stores keep (the fence-store conformance suite runs on it
 * unchanged); `fn` gets a `MemoryTransaction`, whose rows commit with the fence and the fire's claim.
 * Within one process only: never a production store.
 *
 * @example
 * ```ts
 * const database = createMemoryFenceDatabase();
 * const guard = createGuard({ store: memoryFences({ database }), resource: 'billing' });
 * await guard.migrate();
 * await guard.guardedWrite(7n, async (trx) => trx.insert('invoices', { id: 1, total: 120 }));
 * ```
 */
export function memoryFences(input: MemoryFencesOptions): FenceStoreFactory<MemoryTransaction> {
  const options = storeOptions('memory fences', input);
  return Object.freeze({ kind: 'memory', open: (context: FenceStoreContext) => memoryFenceStore(options, context) });
}

/** A guard on the in-memory store alone (no fast path), as `createMysqlGuard` is on MySQL. */
export function createMemoryGuard(input: MemoryFencesOptions & { resource: string; logger?: FencedLogger; meterProvider?: MeterProvider }): FenceGuard<MemoryTransaction> {
  const options = storeOptions('memory guard', input);
  const resource = parseResource(input.resource);
  const metrics = new GuardMetrics({ meterProvider: input.meterProvider, resourceAttribute: false, resource, authority: 'memory' });
  return fenceGuardOver(memoryFenceStore(options, { resource, logger: input.logger, metrics })) as FenceGuard<MemoryTransaction>;
}
