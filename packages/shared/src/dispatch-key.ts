import type { Token } from './token.js';

/**
 * The key a queue dedupes one dispatch by: the fire id and the token of the term that dispatched it
 * (`invoices@20261129T100000.000Z#7`).
 *
 * Not the fire id alone. A queue keeps the first copy of a key and drops later ones, so with the fire
 * id alone a deposed leader's copy that reaches the queue first would shut out the new leader's: the
 * job then carries the old token, the guard refuses it as stale once the new term has written, and
 * the fire is lost. Keyed per term, a second dispatch by the same term (a retried enqueue, a catch-up
 * overlapping a tick) is dropped by the queue, a copy from another term is queued beside it, and the
 * guard's fire claim lets at most one of them take effect.
 *
 * @example dispatchKey({ fireId: 'invoices@20261129T100000.000Z', token: '7' }) // 'invoices@20261129T100000.000Z#7'
 */
export function dispatchKey(fire: { readonly fireId: string; readonly token: Token | string }): string {
  return `${fire.fireId}#${fire.token.toString()}`;
}
