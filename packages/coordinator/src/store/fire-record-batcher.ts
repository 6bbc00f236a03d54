import type { FireRecord } from './fire-log.js';

/** Sends one batch of records made under `leaseValue`; answers 1 (recorded) or 0 (not our lease). */
export type SendFireRecords = (leaseValue: string, records: readonly FireRecord[], failoverGapMs: number | null) => Promise<number>;

/** Records gathered for one script call, and the one answer all their callers get. */
interface Batch {
  readonly leaseValue: string;
  readonly records: FireRecord[];
  failoverGapMs: number | null;
  readonly answer: Promise<number>;
  resolve(answer: number): void;
  reject(error: unknown): void;
}

/**
 * Gathers the fire records a scheduler makes in one turn of the event loop and sends them as one
 * script call per lease value (batches of at most `maxBatch`). Each caller still gets the answer
 * for its record and still waits for it before its job's next fire, so a drain behaves as if it
 * recorded alone; what changes is the cost when many jobs come due together: 10,000 records in ~20
 * calls instead of 10,000, and one promise per batch rather than per fire. A batch is checked against
 * the lease once, as a whole: all of it is recorded or none.
 */
export class FireRecordBatcher {
  readonly #send: SendFireRecords;
  readonly #maxBatch: number;
  /** Every batch made since the last flush, full or not, in the order they were opened. */
  #batches: Batch[] = [];
  /** Per lease value, the batch new records join (until it is full). */
  readonly #open = new Map<string, Batch>();

  constructor(send: SendFireRecords, maxBatch = 500) {
    this.#send = send;
    this.#maxBatch = maxBatch;
  }

  /** Records one fire (or baseline) made under `leaseValue`: 1 recorded, 0 the lease is not ours. */
  record(leaseValue: string, record: FireRecord, failoverGapMs: number | null = null): Promise<number> {
    let batch = this.#open.get(leaseValue);
    if (batch === undefined || batch.records.length >= this.#maxBatch) {
      if (this.#batches.length === 0) {
        // After the current turn's callbacks and microtasks: every drain a finished batch released
        // has dispatched its next fire and asked to record it by then.
        setImmediate(() => this.#flush());
      }
      batch = openBatch(leaseValue);
      this.#batches.push(batch);
      this.#open.set(leaseValue, batch);
    }
    batch.records.push(record);
    if (failoverGapMs !== null && batch.failoverGapMs === null) batch.failoverGapMs = failoverGapMs;
    return batch.answer;
  }

  #flush(): void {
    const batches = this.#batches;
    this.#batches = [];
    this.#open.clear();
    for (const batch of batches) this.#send(batch.leaseValue, batch.records, batch.failoverGapMs).then(batch.resolve, batch.reject);
  }
}

function openBatch(leaseValue: string): Batch {
  let resolve!: (answer: number) => void;
  let reject!: (error: unknown) => void;
  const answer = new Promise<number>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { leaseValue, records: [], failoverGapMs: null, answer, resolve, reject };
}
