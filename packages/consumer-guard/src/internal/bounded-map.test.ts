import { describe, expect, it } from 'vitest';
import { BoundedMap } from './bounded-map.js';

describe('BoundedMap', () => {
  it('holds at most its capacity, forgetting the entry inserted first', () => {
    const map = new BoundedMap<string, number>(3);
    for (const [i, key] of ['a', 'b', 'c', 'd'].entries()) map.set(key, i);
    expect(map.get('a')).toBeUndefined();
    expect([map.get('b'), map.get('c'), map.get('d')]).toEqual([1, 2, 3]);
  });

  it('updates a key in place: no growth, nothing forgotten', () => {
    const map = new BoundedMap<string, bigint>(2);
    map.set('a', 1n);
    map.set('b', 2n);
    map.set('a', 5n);
    map.set('a', 6n);
    expect([map.get('a'), map.get('b')]).toEqual([6n, 2n]);
    map.set('c', 3n); // the map is full: the first inserted ('a') goes, whatever its updates
    expect([map.get('a'), map.get('b'), map.get('c')]).toEqual([undefined, 2n, 3n]);
  });

  it('forgets a deleted key', () => {
    const map = new BoundedMap<string, number>(2);
    map.set('a', 1);
    map.delete('a');
    expect(map.get('a')).toBeUndefined();
  });
});
