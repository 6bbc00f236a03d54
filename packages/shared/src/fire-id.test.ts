import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fireId, instantText, parseFireId } from './fire-id.js';

// Scheduled times from 1970 to 9999, to the millisecond: the range an ISO-8601 basic id can carry.
const scheduledAt = fc.integer({ min: 0, max: Date.UTC(9999, 11, 31, 23, 59, 59, 999) });
const job = fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/);

describe('fireId', () => {
  it('gives two fires of a job the same id only when they are due at the same millisecond', () => {
    // Dedupe drops a fire whose id was applied already: ids that collide lose fires, so a job that
    // fires every 250 ms needs four ids a second.
    fc.assert(
      fc.property(job, scheduledAt, fc.integer({ min: 0, max: 2000 }), (name, a, apart) => {
        expect(fireId(name, a) === fireId(name, a + apart)).toBe(apart === 0);
      }),
    );
  });

  it('is read back as the job and scheduled time it was made from', () => {
    fc.assert(
      fc.property(job, scheduledAt, (name, at) => {
        expect(parseFireId(fireId(name, at))).toEqual({ job: name, scheduledAt: at });
      }),
    );
  });

  it('reads nothing else as a fire id', () => {
    for (const text of ['invoices', 'invoices@', '@20261129T100000.000Z', 'invoices@2026-11-29T10:00:00.000Z', 'invoices@20261329T100000.000Z']) {
      expect(parseFireId(text)).toBeNull();
    }
  });
});

describe('instantText', () => {
  it('gives the ISO-8601 forms of whatever instant it is asked, in any order (the last one kept is never served for another)', () => {
    fc.assert(
      fc.property(fc.array(scheduledAt, { minLength: 1, maxLength: 20 }), (instants) => {
        for (const at of [...instants, ...instants.reverse()]) {
          const iso = new Date(at).toISOString();
          expect(instantText(at)).toEqual({ ms: at, iso, basic: iso.replaceAll('-', '').replaceAll(':', '') });
        }
      }),
    );
  });

  it('throws for a time that is no date, and still answers the next one right', () => {
    const before = instantText(Date.UTC(2026, 10, 29, 10));
    expect(() => instantText(Number.NaN)).toThrow(RangeError);
    expect(() => instantText(8.64e15 + 1)).toThrow(RangeError);
    expect(instantText(Date.UTC(2026, 10, 29, 10))).toEqual(before);
    expect(instantText(Date.UTC(2026, 10, 29, 10, 0, 0, 1)).iso).toBe('2026-11-29T10:00:00.001Z');
  });
});
