import { MAX_TOKEN, parseToken } from './token.js';
import { describe, expect, it } from 'vitest';
import { dispatchKey } from './dispatch-key.js';
import { fireId } from './fire-id.js';

describe('dispatchKey', () => {
  it('is the fire id and the term token: one key per fire and term, none with a colon (BullMQ refuses those)', () => {
    const id = fireId('invoices', Date.UTC(2026, 10, 29, 10));
    expect(dispatchKey({ fireId: id, token: parseToken(7n) })).toBe('invoices@20261129T100000.000Z#7');
    expect(dispatchKey({ fireId: id, token: '7' })).toBe(dispatchKey({ fireId: id, token: parseToken(7n) }));
    expect(dispatchKey({ fireId: id, token: parseToken(8n) })).not.toBe(dispatchKey({ fireId: id, token: parseToken(7n) }));
    expect(dispatchKey({ fireId: id, token: MAX_TOKEN })).not.toContain(':');
  });
});
