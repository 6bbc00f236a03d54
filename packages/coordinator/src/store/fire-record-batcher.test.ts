import { describe, expect, it } from 'vitest';
import { FireRecordBatcher } from './fire-record-batcher.js';
import type { FireRecord } from './fire-log.js';

interface Sent {
  leaseValue: string;
  records: readonly FireRecord[];
  gap: number | null;
}

/** A batcher whose sends are recorded and answered by `answer`. */
function batcher(answer: (sent: Sent) => Promise<number>, maxBatch?: number) {
  const sent: Sent[] = [];
  const b = new FireRecordBatcher((leaseValue, records, gap) => {
    const s = { leaseValue, records: [...records], gap };
    sent.push(s);
    return answer(s);
  }, maxBatch);
  return { b, sent };
}

describe('FireRecordBatcher', () => {
  it('sends the records of one turn as one call per lease value, and answers each caller', async () => {
    const { b, sent } = batcher(async (s) => (s.leaseValue === '1:a' ? 1 : 0));
    const answers = await Promise.all([
      b.record('1:a', { job: 'x', scheduledAt: 1, dispatchedAt: 2 }),
      b.record('1:a', { job: 'y', scheduledAt: 1 }),
      b.record('0:old', { job: 'z', scheduledAt: 1 }),
    ]);
    expect(answers).toEqual([1, 1, 0]);
    expect(sent).toEqual([
      { leaseValue: '1:a', records: [{ job: 'x', scheduledAt: 1, dispatchedAt: 2 }, { job: 'y', scheduledAt: 1 }], gap: null },
      { leaseValue: '0:old', records: [{ job: 'z', scheduledAt: 1 }], gap: null },
    ]);
  });

  it('splits a large turn into chunks of at most maxBatch, each carrying its own failover gap', async () => {
    const { b, sent } = batcher(async () => 1, 2);
    await Promise.all([
      b.record('1:a', { job: 'j0', scheduledAt: 1 }),
      b.record('1:a', { job: 'j1', scheduledAt: 1 }),
      b.record('1:a', { job: 'j2', scheduledAt: 1 }, 250),
      b.record('1:a', { job: 'j3', scheduledAt: 1 }),
      b.record('1:a', { job: 'j4', scheduledAt: 1 }),
    ]);
    expect(sent.map((s) => s.records.map((r) => r.job))).toEqual([['j0', 'j1'], ['j2', 'j3'], ['j4']]);
    expect(sent.map((s) => s.gap)).toEqual([null, 250, null]);
  });

  it('rejects every caller of a chunk whose call failed, and nobody else', async () => {
    const boom = new Error('connection lost');
    const { b } = batcher(async (s) => {
      if (s.records.some((r) => r.job === 'bad')) throw boom;
      return 1;
    }, 2);
    const results = await Promise.allSettled([
      b.record('1:a', { job: 'bad', scheduledAt: 1 }),
      b.record('1:a', { job: 'other', scheduledAt: 1 }),
      b.record('1:a', { job: 'fine', scheduledAt: 1 }),
    ]);
    expect(results).toEqual([
      { status: 'rejected', reason: boom },
      { status: 'rejected', reason: boom },
      { status: 'fulfilled', value: 1 },
    ]);
  });

  it('starts a new batch for records made after a flush', async () => {
    const { b, sent } = batcher(async () => 1);
    await b.record('1:a', { job: 'x', scheduledAt: 1 });
    await b.record('1:a', { job: 'x', scheduledAt: 2 });
    expect(sent.map((s) => s.records.map((r) => r.scheduledAt))).toEqual([[1], [2]]);
  });
});
