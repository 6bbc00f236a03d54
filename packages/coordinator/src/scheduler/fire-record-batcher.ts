import type { FireRecord } from './scheduler-scripts.js';

/** Sends one batch of records made under `leaseValue`; answers 1 (recorded) or 0 (not our lease). */
export type SendFireRecords = (leaseValue: string, records: readonly FireRecord[], failoverGapMs: number | null) => Promise<number>;

interface Waiting {
  readonly record: FireRecord;
  readonly failoverGapMs: number | null;
  resolve(answer: number): void;
  reject(error: unknown): void;
}

/**
 * Gathers the fire records a scheduler makes in one turn of the event loop and sends them as one
 * script call per lease value (chunks of at most `maxBatch`). Each caller still gets its own answer
 * and still waits for it before its job's next fire, so a drain behaves as if it recorded alone;
 * what changes is the cost when many jobs come due together: 10,000 records in ~20 calls instead
 * of 10,000. A batch is checked against the lease once, as a whole: all of it is recorded or none.
 */
export class FireRecordBatcher {
  readonly #send: SendFireRecords;
  readonly #maxBatch: number;
  #waiting = new Map<string, Waiting[]>();
  #flushScheduled = false;

  constructor(send: SendFireRecords, maxBatch = 500) {
    this.#send = send;
    this.#maxBatch = maxBatch;
  }

  /** Records one fire (or baseline) made under `leaseValue`: 1 recorded, 0 the lease is not ours. */
  record(leaseValue: string, record: FireRecord, failoverGapMs: number | null = null): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      let queue = this.#waiting.get(leaseValue);
      if (queue === undefined) this.#waiting.set(leaseValue, (queue = []));
      queue.push({ record, failoverGapMs, resolve, reject });
      if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        // After the current turn's callbacks and microtasks: every drain a finished batch released
        // has dispatched its next fire and asked to record it by then.
        setImmediate(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#flushScheduled = false;
    const waiting = this.#waiting;
    this.#waiting = new Map();
    for (const [leaseValue, queue] of waiting) {
      for (let start = 0; start < queue.length; start += this.#maxBatch) {
        const chunk = queue.slice(start, start + this.#maxBatch);
        const gap = chunk.find((w) => w.failoverGapMs !== null)?.failoverGapMs ?? null;
        this.#send(
          leaseValue,
          chunk.map((w) => w.record),
          gap,
        ).then(
          (answer) => chunk.forEach((w) => w.resolve(answer)),
          (error: unknown) => chunk.forEach((w) => w.reject(error)),
        );
      }
    }
  }
}
