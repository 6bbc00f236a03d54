import type { Etcd3 } from 'etcd3';
import { parseHolder, readHolder, type Holder } from './etcd-holder.js';
import { withinBudget } from './etcd-budget.js';

/** Reads asked for in one turn of the event loop, sent together. */
interface PendingReads {
  readonly keys: Buffer[];
  readonly answer: Promise<ReadonlyArray<Holder | null>>;
  timeoutMs: number;
}

/**
 * Most range operations in one read-only transaction: etcd refuses more than `--max-txn-ops` (128
 * by default) operations in one transaction.
 */
const MAX_READS_PER_TXN = 100;

/**
 * The owner checks of one process's renewals, batched: every lease key read asked for in the same
 * turn of the event loop goes out as one read-only transaction (one request, answered at one
 * revision, served by etcd's linearizable read path like a single range). Renewals on the shared
 * grid arrive in one turn, so a process leading a thousand names reads their keys in ten requests
 * per renew interval instead of a thousand.
 *
 * A batch leaves after every read in it was asked for (the next turn), so each read still happens
 * after its renew was asked for, as a read of its own would.
 */
export class EtcdHolderReads {
  readonly #client: Etcd3;
  #pending: PendingReads | undefined;

  constructor(client: Etcd3) {
    this.#client = client;
  }

  /** The holder of the lease key `key` (null: absent or not one of ours), read with this turn's others. */
  async read(key: Buffer, timeoutMs: number): Promise<Holder | null> {
    let batch = this.#pending;
    if (batch === undefined || batch.keys.length >= MAX_READS_PER_TXN) {
      const opened: PendingReads = { keys: [], timeoutMs, answer: Promise.resolve([]) };
      (opened as { answer: Promise<ReadonlyArray<Holder | null>> }).answer = new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
        if (this.#pending === opened) this.#pending = undefined;
        return this.#send(opened.keys, opened.timeoutMs);
      });
      this.#pending = batch = opened;
    }
    const index = batch.keys.push(key) - 1;
    batch.timeoutMs = Math.min(batch.timeoutMs, timeoutMs);
    // A reply without this read's answer owns nothing: fail closed.
    return (await batch.answer)[index] ?? null;
  }

  async #send(keys: readonly Buffer[], timeoutMs: number): Promise<ReadonlyArray<Holder | null>> {
    if (keys.length === 1) return [await readHolder(this.#client, keys[0]!, timeoutMs)];
    const reply = await withinBudget('txn', timeoutMs, (o) => this.#client.kv.txn({ compare: [], success: keys.map((key) => ({ request_range: { key } })), failure: [] }, o));
    return reply.responses.map((r) => parseHolder(r.response_range?.kvs[0]));
  }
}
