import { fireId, type Fence } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { intervalSchedule } from './job-schedule.js';
import { queuedSince, unappliedQueuedFires } from './queued-fires.js';

describe('queuedSince', () => {
  const every10 = intervalSchedule(10);

  it('lists every fire from the mark through the record, both ends included', () => {
    expect(queuedSince(every10, 30, 70, 0)).toEqual([30, 40, 50, 60, 70]);
    expect(queuedSince(every10, 31, 69, 0)).toEqual([40, 50, 60]);
  });

  it('starts no earlier than the catch-up window, and is empty when the mark is past the record', () => {
    expect(queuedSince(every10, 0, 50, 25)).toEqual([30, 40, 50]);
    expect(queuedSince(every10, 71, 70, 0)).toEqual([]);
  });
});

describe('unappliedQueuedFires', () => {
  const fence = (answer: readonly string[] | Error, asked: string[][] = []): Fence => ({
    resource: 'ledger',
    highest: async () => null,
    advance: async () => undefined,
    appliedFireIds: async (ids) => {
      asked.push([...ids]);
      if (answer instanceof Error) throw answer;
      return new Set(answer.filter((id) => ids.includes(id)));
    },
  });

  it('owes the fires no fence claims, asking every fence once for all jobs; a claim on any fence counts', async () => {
    const asked: string[][] = [];
    const owed = await unappliedQueuedFires(
      new Map([
        ['a', [10, 20, 30]],
        ['b', [20]],
      ]),
      [fence([fireId('a', 20)], asked), fence([fireId('a', 30), fireId('b', 20)]), { resource: 'plain', highest: async () => null, advance: async () => undefined }],
      () => undefined,
    );
    expect(owed).toEqual(
      new Map([
        ['a', [10]],
        ['b', []],
      ]),
    );
    expect(asked).toEqual([[fireId('a', 10), fireId('a', 20), fireId('a', 30), fireId('b', 20)]]);
  });

  it('owes every fire when no fence can tell, and says why a fence did not', async () => {
    const errors: unknown[] = [];
    const down = new Error('down');
    expect(await unappliedQueuedFires(new Map([['a', [10, 20]]]), [fence(down)], (e) => errors.push(e))).toEqual(new Map([['a', [10, 20]]]));
    expect(errors).toEqual([down]);
    expect(await unappliedQueuedFires(new Map([['a', [10]]]), [], () => undefined)).toEqual(new Map([['a', [10]]]));
  });
});
