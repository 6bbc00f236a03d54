/**
 * A Map that forgets its oldest entries past `capacity`. For caches of hints, where forgetting is
 * always safe; insertion order approximates recency because `set` re-inserts.
 */
export class BoundedMap<K, V> {
  readonly #map = new Map<K, V>();
  constructor(readonly capacity: number) {}

  get(key: K): V | undefined {
    return this.#map.get(key);
  }

  delete(key: K): void {
    this.#map.delete(key);
  }

  set(key: K, value: V): void {
    this.#map.delete(key);
    this.#map.set(key, value);
    if (this.#map.size > this.capacity) {
      const oldest = this.#map.keys().next();
      if (oldest.done !== true) this.#map.delete(oldest.value);
    }
  }
}
