/** A min-heap of jobs by next due time: the leader looks only at what is due, even with 10,000 jobs. */
export class DueQueue {
  readonly #heap: Array<{ at: number; job: string }> = [];

  get size(): number {
    return this.#heap.length;
  }

  /** The earliest due time queued, or undefined when empty. */
  nextAt(): number | undefined {
    return this.#heap[0]?.at;
  }

  push(job: string, at: number): void {
    const heap = this.#heap;
    heap.push({ at, job });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent]!.at <= heap[i]!.at) break;
      [heap[parent], heap[i]] = [heap[i]!, heap[parent]!];
      i = parent;
    }
  }

  /** The earliest entry due at or before `now`, removed; undefined when none is due. */
  popDue(now: number): { at: number; job: string } | undefined {
    const heap = this.#heap;
    if (heap.length === 0 || heap[0]!.at > now) return undefined;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && heap[l]!.at < heap[m]!.at) m = l;
        if (r < heap.length && heap[r]!.at < heap[m]!.at) m = r;
        if (m === i) break;
        [heap[m], heap[i]] = [heap[i]!, heap[m]!];
        i = m;
      }
    }
    return top;
  }

  clear(): void {
    this.#heap.length = 0;
  }
}
