/** One lease's renew, as a store's batch statement takes it. */
export interface RenewRequest {
  readonly lease: string;
  readonly token: string;
  readonly nodeId: string;
}

/** Sends one batch (leases of one TTL) and answers per request, in the order asked. */
export type SendRenews<Answer> = (ttlMs: number, requests: readonly RenewRequest[]) => Promise<ReadonlyArray<Answer | undefined>>;

interface Batch<Answer> {
  readonly requests: RenewRequest[];
  readonly waiters: Array<{ resolve(answer: Answer): void; reject(error: unknown): void }>;
}

/**
 * Gathers the renews a process makes within `windowMs` into one statement per TTL (at most
 * `maxBatch` leases each), for a store that batches renewals (`LeaseBackend.batchesRenewals`): a
 * lease group of 1,000 leases renews with one statement per tick, not 1,000. Safe to delay: each
 * coordinator counts its new deadline from when it asked, before the batch was sent, so the store's
 * expiry (from when the statement ran) is never earlier than the deadline it believes. The replies
 * of one batch arrive together, so the next renews of its leases fall due together and join one
 * batch again: the renews of a group align by themselves.
 */
export class RenewBatcher<Answer> {
  readonly #send: SendRenews<Answer>;
  readonly #windowMs: number;
  readonly #maxBatch: number;
  readonly #open = new Map<number, Batch<Answer>>();

  constructor(send: SendRenews<Answer>, windowMs: number, maxBatch = 2000) {
    this.#send = send;
    this.#windowMs = windowMs;
    this.#maxBatch = maxBatch;
  }

  renew(ttlMs: number, request: RenewRequest): Promise<Answer> {
    return new Promise((resolve, reject) => {
      let batch = this.#open.get(ttlMs);
      if (batch === undefined) {
        batch = { requests: [], waiters: [] } as Batch<Answer>;
        this.#open.set(ttlMs, batch);
        const opened = batch;
        setTimeout(() => this.#flush(ttlMs, opened), this.#windowMs);
      }
      batch.requests.push(request);
      batch.waiters.push({ resolve, reject });
      if (batch.requests.length >= this.#maxBatch) this.#flush(ttlMs, batch);
    });
  }

  #flush(ttlMs: number, batch: Batch<Answer>): void {
    if (this.#open.get(ttlMs) !== batch) return; // flushed already (it filled up)
    this.#open.delete(ttlMs);
    this.#send(ttlMs, batch.requests).then(
      (answers) => {
        batch.waiters.forEach((waiter, i) => {
          const answer = answers[i];
          if (answer === undefined) waiter.reject(new Error(`the renew batch answered nothing for lease ${batch.requests[i]!.lease}`));
          else waiter.resolve(answer);
        });
      },
      (error: unknown) => {
        for (const waiter of batch.waiters) waiter.reject(error);
      },
    );
  }
}
