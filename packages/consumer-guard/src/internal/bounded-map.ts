/**
 * A Map that forgets its oldest entries past `capacity`. For caches of hints, where forgetting is
 * always safe. "Oldest" is by first insertion: updating a key in place keeps its position, because
 * re-inserting (delete, then set) on every write cost more on the guard's hot path than an entry
 * forgotten early ever does (one more statement).
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
    const size = this.#map.size;
    this.#map.set(key, value);
    if (this.#map.size === size) return; // an update in place
    if (this.#map.size > this.capacity) {
      const oldest = this.#map.keys().next();
      if (oldest.done !== true) this.#map.delete(oldest.value);
    }
  }
}
