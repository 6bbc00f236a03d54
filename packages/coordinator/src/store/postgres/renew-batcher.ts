/** One lease's renew, as the batch statement takes it. */
export interface RenewRequest {
  readonly lease: string;
  readonly token: string;
  readonly nodeId: string;
}

export interface RenewAnswer {
  readonly renewed: boolean;
  /** The server's clock when it decided, microseconds since the epoch (a decimal string). */
  readonly nowMicros: string;
  /** The timeline of the server that answered; null on a server in recovery (see primary-confirmation.ts). */
  readonly timeline: bigint | null;
}

/** Sends one batch (leases of one TTL) and answers per request, in the order asked. */
export type SendRenews = (ttlMs: number, requests: readonly RenewRequest[]) => Promise<readonly RenewAnswer[]>;

interface Batch {
  readonly requests: RenewRequest[];
  readonly waiters: Array<{ resolve(answer: RenewAnswer): void; reject(error: unknown): void }>;
}

/**
 * Gathers the renews a process makes within `windowMs` into one statement per TTL (at most
 * `maxBatch` leases each): a lease group of 1,000 leases renews with one statement per tick, not
 * 1,000. Safe to delay: each coordinator counts its new deadline from when it asked, before the
 * batch was sent, so the store's expiry (from when the statement ran) is never earlier than the
 * deadline it believes. The replies of one batch arrive together, so the next renews of its leases
 * fall due together and join one batch again: the renews of a group align by themselves.
 */
export class RenewBatcher {
  readonly #send: SendRenews;
  readonly #windowMs: number;
  readonly #maxBatch: number;
  readonly #open = new Map<number, Batch>();

  constructor(send: SendRenews, windowMs: number, maxBatch = 2000) {
    this.#send = send;
    this.#windowMs = windowMs;
    this.#maxBatch = maxBatch;
  }

  renew(ttlMs: number, request: RenewRequest): Promise<RenewAnswer> {
    return new Promise((resolve, reject) => {
      let batch = this.#open.get(ttlMs);
      if (batch === undefined) {
        batch = { requests: [], waiters: [] };
        this.#open.set(ttlMs, batch);
        const opened = batch;
        setTimeout(() => this.#flush(ttlMs, opened), this.#windowMs);
      }
      batch.requests.push(request);
      batch.waiters.push({ resolve, reject });
      if (batch.requests.length >= this.#maxBatch) this.#flush(ttlMs, batch);
    });
  }

  #flush(ttlMs: number, batch: Batch): void {
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
