import { describe, expect, it } from 'vitest';
import { graphileWorkerQueue, pgBossQueue, uuidFromKey } from './queue-targets.js';

// What each target sends is checked against the real library in test/queues/graphile-worker.test.ts and
// test/queues/pg-boss.test.ts.

describe('the PostgreSQL queue targets', () => {
  it('derive pg-boss job ids from the dispatch key: the same key, the same valid UUID; another key, another', () => {
    const a = uuidFromKey('invoices@20261129T100000.000Z#7');
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(uuidFromKey('invoices@20261129T100000.000Z#7')).toBe(a);
    expect(uuidFromKey('invoices@20261129T100000.000Z#8')).not.toBe(a);
  });

  it('refuse what is not the library they adapt, before any fire', () => {
    expect(() => graphileWorkerQueue({} as never)).toThrow(/WorkerUtils/);
    expect(() => pgBossQueue({} as never)).toThrow(/PgBoss/);
  });
});
